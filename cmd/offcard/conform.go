package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"time"

	"github.com/offcard/offcard/conform"
	"github.com/offcard/offcard/tthw"
)

func init() {
	commands["conform"] = command{"run the same op sequences on sim and on a device library, op by op", runConform}
}

// conformReport is the --json document.
type conformReport struct {
	Lib       string            `json:"lib"`
	BuildInfo map[string]string `json:"build_info"`
	Arch      string            `json:"arch"`
	Cases     int               `json:"cases"`
	Passed    int               `json:"passed"`
	Failed    int               `json:"failed"`
	Results   []conformResult   `json:"results"`
}

type conformResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

func runConform(e *env, args []string) error {
	fs := newFlags(e, "conform", "--lib PATH [--arch wormhole|blackhole] [--only NAME] [--junit OUT.xml] [--json]")
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (the loopback, or the ttnn shim on a card)")
	arch := fs.String("arch", "", "ask the library for this arch (the loopback models either; a card must match)")
	only := fs.String("only", "", "run only the cases whose name contains `NAME`")
	junit := fs.String("junit", "", "also write a JUnit XML report to `FILE`")
	asJSON := fs.Bool("json", false, "print a JSON report instead of lines")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *lib == "" {
		return bad("--lib is required")
	}
	if _, err := os.Stat(*lib); err != nil {
		return bad("--lib: %v", err)
	}
	if *arch != "" && *arch != "wormhole" && *arch != "blackhole" {
		return bad("--arch %q: want wormhole or blackhole", *arch)
	}
	if err := probeLib(*lib); err != nil {
		return err
	}
	opts := conform.Options{Lib: *lib, Tthw: tthw.Options{Arch: *arch}, Only: *only}
	var jf *atomicFile
	if *junit != "" {
		var err error
		if jf, err = createAtomic(*junit); err != nil {
			return err
		}
		defer jf.Abort()
	}
	start := time.Now()
	progress := func(r conform.Result) {
		if *asJSON {
			return
		}
		if r.OK {
			fmt.Fprintf(e.stdout, "ok    %-30s %s\n", r.Name, r.Detail)
		} else {
			fmt.Fprintf(e.stdout, "FAIL  %-30s %s\n", r.Name, r.Detail)
		}
	}
	rep, err := conform.Run(opts, conform.Cases(), progress)
	if err != nil {
		return badInput{err}
	}
	if len(rep.Results) == 0 {
		return bad("--only %q matches no case", *only)
	}
	failed := rep.Failed()
	if *asJSON {
		doc := conformReport{Lib: rep.Lib, BuildInfo: rep.BuildInfo, Arch: rep.Facts.Arch, Cases: len(rep.Results),
			Passed: len(rep.Results) - failed, Failed: failed}
		for _, r := range rep.Results {
			doc.Results = append(doc.Results, conformResult{r.Name, r.OK, r.Detail})
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "conform: %d %s, %d passed, %d failed (%s, %s, tt-metal %s, %s)\n", len(rep.Results), plural(len(rep.Results), "case"), len(rep.Results)-failed, failed,
			rep.BuildInfo["implementation"], rep.Facts.Arch, rep.BuildInfo["tt_metal_commit"], time.Since(start).Round(time.Millisecond))
	}
	if jf != nil {
		if err := writeConformJUnit(jf, rep, time.Since(start)); err != nil {
			return err
		}
		if err := jf.Commit(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return errFound
	}
	return nil
}

// JUnit XML (the schema CI systems read: testsuite/testcase/failure).
type conformSuite struct {
	XMLName  xml.Name      `xml:"testsuite"`
	Name     string        `xml:"name,attr"`
	Tests    int           `xml:"tests,attr"`
	Failures int           `xml:"failures,attr"`
	Time     string        `xml:"time,attr"`
	Props    []conformProp `xml:"properties>property"`
	Cases    []conformCase `xml:"testcase"`
}

type conformProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type conformCase struct {
	Name      string          `xml:"name,attr"`
	Classname string          `xml:"classname,attr"`
	Failure   *conformFailure `xml:"failure,omitempty"`
	SystemOut string          `xml:"system-out,omitempty"`
}

type conformFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func writeConformJUnit(f *atomicFile, rep conform.Report, d time.Duration) error {
	s := conformSuite{Name: "offcard conform", Tests: len(rep.Results), Failures: rep.Failed(), Time: fmt.Sprintf("%.3f", d.Seconds()),
		Props: []conformProp{{"lib", rep.Lib}, {"arch", rep.Facts.Arch}, {"tt_metal_commit", rep.BuildInfo["tt_metal_commit"]}, {"implementation", rep.BuildInfo["implementation"]}}}
	for _, r := range rep.Results {
		c := conformCase{Name: r.Name, Classname: "conform"}
		if r.OK {
			c.SystemOut = r.Detail
		} else {
			c.Failure = &conformFailure{Message: oneLine(r.Detail), Text: r.Detail}
		}
		s.Cases = append(s.Cases, c)
	}
	if _, err := f.WriteString(xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(f)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := f.WriteString("\n")
	return err
}
