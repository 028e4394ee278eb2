package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/offcard/offcard/tt"
)

func init() {
	commands["version"] = command{"print the module version, VCS revision, Go version and the pinned tt-metal commit", runVersion}
}

// versionInfo is what offcard version prints (--json: these keys).
type versionInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"vcs_revision,omitempty"`
	Time      string `json:"vcs_time,omitempty"`
	Modified  bool   `json:"vcs_modified,omitempty"`
	GoVersion string `json:"go_version"`
	TTMetal   string `json:"tt_metal_commit"`
}

// buildInfo reads the binary's build information; tests replace it.
var buildInfo = debug.ReadBuildInfo

func readVersion() versionInfo {
	v := versionInfo{Module: "github.com/offcard/offcard", Version: "unknown", TTMetal: tt.TTMetalCommit}
	bi, ok := buildInfo()
	if !ok {
		return v
	}
	v.Module, v.Version, v.GoVersion = bi.Main.Path, bi.Main.Version, bi.GoVersion
	if v.Module == "" {
		// A test binary: no main module recorded.
		v.Module = "github.com/offcard/offcard"
	}
	if v.Version == "" {
		v.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func runVersion(e *env, args []string) error {
	fs := newFlags(e, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.parse(args); err != nil {
		return err
	}
	v := readVersion()
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintf(e.stdout, "offcard %s (module %s)\n", v.Version, v.Module)
	rev := v.Revision
	if rev == "" {
		rev = "unknown (built outside a git checkout, or with -buildvcs=false)"
	} else {
		if v.Time != "" {
			rev += " " + v.Time
		}
		if v.Modified {
			rev += " (modified)"
		}
	}
	fmt.Fprintf(e.stdout, "revision: %s\n", rev)
	fmt.Fprintf(e.stdout, "go: %s\n", v.GoVersion)
	fmt.Fprintf(e.stdout, "tt-metal: %s (the commit the tt contract mirrors)\n", v.TTMetal)
	return nil
}
