// Command export writes the synthetic weights the cross-check fixtures are
// made from (make crosscheck): qwen3.Synth of a preset, cut to its first
// --layers layers, as config.json + model.safetensors.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/offcard/offcard/qwen3"
)

func main() {
	preset := flag.String("preset", "tiny", "qwen3 preset")
	seed := flag.Uint64("seed", 1, "Synth seed")
	layers := flag.Int("layers", 0, "keep the first N layers (0: all)")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	if err := run(*preset, *seed, *layers, *out); err != nil {
		fmt.Fprintln(os.Stderr, "export:", err)
		os.Exit(2)
	}
}

func run(preset string, seed uint64, layers int, out string) error {
	cfg, err := qwen3.Preset(preset)
	if err != nil {
		return err
	}
	if layers > 0 {
		cfg.NumHiddenLayers = layers
	}
	w, err := qwen3.Synth(cfg, seed)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	return w.Export(out)
}
