// Command offcard-engine is offcard's own engine (qwen3.Engine on the
// simulator) behind the engine line protocol (package wire): the
// reference an engine offcard did not write is held to, and the target of
// `offcard mutants --engine`, which builds it with each catalog mutant
// applied through `go build -overlay`.
//
//	offcard check --engine offcard-engine
//
// It reads requests on stdin and answers on stdout, one JSON object per
// line. The hello's model preset and seed give the weights (qwen3.Synth,
// as offcard's oracle makes them); its hints give the engine's options
// (page-table width policy, eager or captured, recapture period) and the
// simulator's (arch, strict sanitizer). It offers full logits, claims
// bit-exactness with ref, and reports every observation: cur_pos and
// page-table rows read back from the simulated device (without a host
// transfer the engine would count), the KV write log, and the sanitizer's
// findings.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/wire"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			fmt.Fprintln(stdout, "usage: offcard-engine   (speaks offcard's engine line protocol on stdin/stdout; see offcard check --engine)")
			return 0
		}
		fmt.Fprintf(stderr, "offcard-engine: unexpected argument %q (it takes none; try --help)\n", args[0])
		return 2
	}
	if err := wire.Serve(stdin, stdout, proptest.OpenSimEngine); err != nil {
		fmt.Fprintf(stderr, "offcard-engine: %v\n", err)
		return 1
	}
	return 0
}
