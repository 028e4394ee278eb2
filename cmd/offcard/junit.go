package main

import (
	"encoding/xml"
	"fmt"
	"time"
)

// JUnit XML, the report format CI systems show test by test (Jenkins,
// GitLab, GitHub Actions reporters): <testsuites> holding one <testsuite>
// of <testcase>s, each passed, or with a <failure> (the check found a
// difference) or an <error> (it could not run). Go's encoder escapes
// markup and replaces characters XML cannot hold, so any text is valid.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func junitSeconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// newJUnit wraps one suite of cases into a document, counting them.
func newJUnit(name string, start time.Time, elapsed time.Duration, props []junitProperty, cases []junitCase) junitSuites {
	s := junitSuite{Name: name, Tests: len(cases), Time: junitSeconds(elapsed), Timestamp: start.UTC().Format("2006-01-02T15:04:05"),
		Properties: props, Cases: cases}
	for _, c := range cases {
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		}
	}
	return junitSuites{Name: name, Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: s.Time, Suites: []junitSuite{s}}
}

// openJUnit opens the report file before the work starts (a bad path is
// bad usage, found at once); nil when path is "".
func openJUnit(path string) (*atomicFile, error) {
	if path == "" {
		return nil, nil
	}
	return createAtomic(path)
}

// writeJUnit writes the document into f, which openJUnit opened, and
// renames it into place: a reader never sees half a report.
func writeJUnit(f *atomicFile, doc junitSuites) error {
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err == nil {
		_, err = fmt.Fprintf(f, "%s%s\n", xml.Header, b)
	}
	if err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
