// Package proptest will drive any qwen3.Decoder with random request
// schedules (gopter), compare every step bit for bit with the ref oracle,
// shrink failures to short scripts, and run the mutant catalog.
//
// Status: not implemented yet (see the property-suite issue).
package proptest
