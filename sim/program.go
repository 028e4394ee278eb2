package sim

// program is a compiled program held by the program cache.
type program interface{}
