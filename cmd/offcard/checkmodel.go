package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

// campaignModel is the model of a check campaign, from --preset and
// --model: the Base fields that fix it and the flags that name it again
// in a replay command ("" for the default, tiny).
type campaignModel struct {
	preset, dir string
}

// large reports whether the campaign's model is larger than the default
// tiny preset (a real-size preset, or a checkpoint).
func (m campaignModel) large() bool { return m.dir != "" || (m.preset != "" && m.preset != "tiny") }

// largeModelGCPercent is the collector's GOGC for a campaign of a large
// model when the environment sets none. Its live heap is gigabytes of
// weights, caches and device memory with few pointers, so a collection
// costs little and Go's default heap goal of twice the live heap is the
// cost that shows: check --preset qwen3-0.6b --cases 8 peaked at 11.5 GB
// RSS (127 s) with GOGC 100, 10.8 GB (120 s) with 50, 9.2 GB (116 s) with
// 25, the same output, on a 2-core AMD EPYC; at 20 cases 15.0 GB (244 s)
// with 100, 10.1 GB (230 s) with 25.
const largeModelGCPercent = 25

// gcPercent is the GOGC a campaign of m sets (0: leave it), given the
// environment's GOGC ("" when unset): largeModelGCPercent for a large
// model unless the environment chose.
func (m campaignModel) gcPercent(env string) int {
	if !m.large() || env != "" {
		return 0
	}
	return largeModelGCPercent
}

// parseCampaignModel checks --preset NAME and --model DIR (one at most; the
// directory must hold a config.json offcard reads, and a script must be
// able to name it).
func parseCampaignModel(preset, dir string) (campaignModel, error) {
	switch {
	case preset != "" && dir != "":
		return campaignModel{}, bad("--preset and --model: give one")
	case preset != "":
		if _, err := qwen3.Preset(preset); err != nil {
			return campaignModel{}, bad("--preset: %v", err)
		}
		return campaignModel{preset: preset}, nil
	case dir != "":
		abs, err := filepath.Abs(dir)
		if err != nil {
			return campaignModel{}, bad("--model %s: %v", dir, err)
		}
		if strings.ContainsAny(abs, " \t\n\r'") {
			return campaignModel{}, bad("--model %q: a path with white space or quotes cannot be named in a replay script", abs)
		}
		cfgPath := filepath.Join(abs, "config.json")
		if _, err := qwen3.LoadConfig(cfgPath); err != nil {
			if pe := pathErr(err); pe != err {
				return campaignModel{}, bad("--model: %s: %v", cfgPath, pe)
			}
			return campaignModel{}, bad("--model: %v", err)
		}
		st := filepath.Join(abs, "model.safetensors")
		if _, err := os.Stat(st); err != nil {
			if _, err2 := os.Stat(filepath.Join(abs, "model.safetensors.index.json")); err2 != nil {
				return campaignModel{}, bad("--model: %s: %v", st, pathErr(err))
			}
		}
		return campaignModel{dir: abs}, nil
	}
	return campaignModel{}, nil
}

// base sets the model of b.
func (m campaignModel) base(b proptest.Base) proptest.Base {
	b.Model, b.ModelDir = m.preset, m.dir
	return b
}

// replayArgs are the flags that name the model in a replay command.
func (m campaignModel) replayArgs() string {
	switch {
	case m.dir != "":
		return "--model " + m.dir
	case m.preset != "" && m.preset != "tiny":
		return "--preset " + m.preset
	}
	return ""
}

// prepare makes the campaign's one model before the campaign starts (a
// synthetic one with its progress on a terminal; a checkpoint loaded), so
// that the cases share it and a bad checkpoint is one error line. tiny is
// made by the cases themselves (three seeds, milliseconds each).
func (m campaignModel) prepare(e *env) error {
	sc := proptest.Scenario{Model: m.preset, ModelSeed: 1, ModelDir: m.dir}
	if m.dir != "" {
		sc.Model, sc.ModelSeed = "", 0
	} else if m.preset == "" || m.preset == "tiny" {
		return nil
	}
	var progress func(done, total int64)
	if e.stderrTTY {
		t0, last := time.Now(), time.Time{}
		progress = func(done, total int64) {
			now := time.Now()
			if done < total && now.Sub(last) < 200*time.Millisecond {
				return
			}
			last = now
			fmt.Fprintf(e.stderr, "\rcheck: synthesising %s (seed 1): %3d%% of %d M values, %.0fs", m.preset, done*100/max(total, 1), total>>20, time.Since(t0).Seconds())
			if done == total {
				fmt.Fprint(e.stderr, "\r\033[K")
			}
		}
	}
	if _, err := proptest.PrepareModel(sc, progress); err != nil {
		if m.dir != "" {
			return bad("--model: %v", err)
		}
		return err
	}
	return nil
}
