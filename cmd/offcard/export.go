package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/qwen3/tokenizer"
)

func runExport(e *env, args []string) error {
	fs := newFlags(e, "export", "--synth tiny|qwen3-0.6b --seed N --out DIR [--tokenizer FILE]")
	m := modelFlags{e: e, cmd: "export"}
	fs.StringVar(&m.synth, "synth", "", "synthetic model preset: tiny or qwen3-0.6b")
	fs.Uint64Var(&m.seed, "seed", 1, "seed of the synthetic weights")
	out := fs.String("out", "", "output `DIR` (created if missing)")
	tok := fs.String("tokenizer", "", "tokenizer.json `FILE` to copy beside the model")
	if err := fs.parse(args); err != nil {
		return err
	}
	if m.synth == "" || *out == "" {
		return bad("need --synth and --out")
	}
	// Interrupted: Export's temporary files go, and the directory if this
	// command made it and it is still empty.
	_, statErr := os.Stat(*out)
	defer atInterrupt(func() {
		for _, n := range []string{qwen3.SafetensorsFile, qwen3.ConfigFile} {
			tmps, _ := filepath.Glob(filepath.Join(*out, "."+n+".*.tmp"))
			for _, t := range tmps {
				os.Remove(t)
			}
		}
		if statErr != nil {
			os.Remove(*out)
		}
	})()
	if *tok != "" {
		if _, err := tokenizer.Load(*tok); err != nil {
			return badInput{err}
		}
	}
	if err := checkOutputDir("--out", *out); err != nil {
		return err
	}
	w, err := m.load(nil)
	if err != nil {
		return err
	}
	stop := startPhase(e, "export", "writing "+*out, func() string { return fmt.Sprintf("%d MB so far", dirBytes(*out)>>20) })
	err = w.Export(*out)
	stop()
	if err != nil {
		return err
	}
	if *tok != "" {
		return copyFileAtomic(*tok, filepath.Join(*out, "tokenizer.json"))
	}
	return nil
}

func copyFileAtomic(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return badInput{err}
	}
	defer in.Close()
	out, err := createAtomic(dst)
	if err != nil {
		return err
	}
	defer out.Abort()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	return out.Commit()
}
