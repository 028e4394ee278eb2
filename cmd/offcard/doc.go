// Command offcard is the command line of offcard: generate text or logits with
// the ref oracle, export synthetic checkpoints, and (as they land) simulate,
// check and adjudicate paged decode engines.
//
// Every command takes --help and exits 0 on success, 1 when a check finds a
// difference, and 2 on bad usage or bad input, with one clear line on stderr
// and no partially written output file.
package main
