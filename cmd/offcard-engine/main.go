// Command offcard-engine is offcard's own engine (qwen3.Engine on the
// simulator) behind the engine line protocol (package wire): the
// reference an engine offcard did not write is held to, and the target of
// `offcard mutants --engine`, which builds it with each catalog mutant
// applied through `go build -overlay`.
//
//	offcard check --engine offcard-engine
//
// It reads requests on stdin and answers on stdout, one JSON object per
// line, in protocol version 3 (1 or 2 when the hello asks for it). The
// hello's model preset and seed give the weights (qwen3.Synth, as
// offcard's oracle makes them); its hints give the engine's options
// (page-table width policy, eager or captured, prefill mode, recapture
// period) and the simulator's (arch, strict sanitizer), and it says it
// follows them. It offers full logits, claims bit-exactness, and reports
// every observation: cur_pos and page-table rows read back from the
// simulated device (without a host transfer the engine would count), the
// KV write log, the sanitizer's findings, and from the device's own
// events each call's regime and host writes and the live allocations and
// traces (after the hello, every call, and bye). In version 3 its hello
// lists exactly the serving calls (prefill_from, verify, copy_blocks) its
// decoder implements (wire.Serve asks qwen3.Serves), and it answers those.
//
// OFFCARD_ENGINE_OFFER restricts what it offers, to see what each
// observation buys: a comma-separated list of observations (cur_pos,
// page_table, kv_writes, findings, regime, host_writes, memory, close),
// page_pad and follows_hints, or none (tokens and full logits only).
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/wire"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			fmt.Fprintln(stdout, "usage: offcard-engine   (speaks offcard's engine line protocol, version 3, on stdin/stdout; see offcard check --engine)")
			fmt.Fprintln(stdout, "  "+offerEnv+"=LIST  offer only LIST (comma-separated: "+strings.Join(offerable(), ", ")+"; or none)")
			return 0
		}
		fmt.Fprintf(stderr, "offcard-engine: unexpected argument %q (it takes none; try --help)\n", args[0])
		return 2
	}
	offer, err := parseOffer(os.Getenv(offerEnv))
	if err != nil {
		fmt.Fprintf(stderr, "offcard-engine: %s: %v\n", offerEnv, err)
		return 2
	}
	open := func(h wire.Hello) (wire.Engine, wire.Caps, error) {
		e, c, err := proptest.OpenSimEngine(h)
		if err == nil && offer != nil {
			c = restrict(c, offer)
		}
		return e, c, err
	}
	if err := wire.Serve(stdin, stdout, open); err != nil {
		fmt.Fprintf(stderr, "offcard-engine: %v\n", err)
		return 1
	}
	return 0
}

// offerEnv restricts what the engine offers (mutants.EngineOfferEnv).
const offerEnv = "OFFCARD_ENGINE_OFFER"

func offerable() []string { return append(wire.Observes(wire.Version), "page_pad", "follows_hints") }

// parseOffer reads offerEnv's value: nil for everything (unset or empty).
func parseOffer(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	offer := []string{}
	for _, x := range strings.Split(v, ",") {
		switch x = strings.TrimSpace(x); {
		case x == "" || x == "none":
		case slices.Contains(offerable(), x):
			offer = append(offer, x)
		default:
			return nil, fmt.Errorf("%q: want a comma-separated list of %s, or none", x, strings.Join(offerable(), ", "))
		}
	}
	return offer, nil
}

// restrict is c offering only what offer lists (wire.Serve leaves the
// observations c does not offer out of the replies).
func restrict(c wire.Caps, offer []string) wire.Caps {
	c.Observes = slices.DeleteFunc(slices.Clone(c.Observes), func(o string) bool { return !slices.Contains(offer, o) })
	if !slices.Contains(offer, "page_pad") {
		c.PagePad = nil
	}
	c.FollowsHints = c.FollowsHints && slices.Contains(offer, "follows_hints")
	return c
}
