// Command offcard is the command line of offcard: check (the property
// campaign: random schedules of the paged engine on the simulator against the
// ref oracle), replay (one saved script), mutants (the mutant catalog), sim
// (one schedule, step by step), generate (the oracle on a prompt), export
// (synthetic checkpoints), tokenize and version. `offcard --help` lists
// what this build has; `offcard help CMD` or `offcard CMD --help` prints a
// command's flags on stdout.
//
// Every command exits 0 on success, 1 when a check finds a difference, and 2
// on bad usage or bad input, with one clear line on stderr and no partially
// written output file (every output goes through one atomic writer, mode
// 0644). Exit 3 is an internal error of offcard (a recovered panic: a bug to
// report). Every JSON output uses snake_case keys and writes seeds as
// strings.
package main
