package qwen3

// Validate is replaced by the config helper's full version (see config_parse.go).
func (c Config) Validate() error { return nil }
