// Package hugeheap asks Linux to back the Go heap with transparent huge
// pages, where the kernel gives them only to memory that asks.
//
// The Go runtime leaves its heap to the kernel's default. Where
// /sys/kernel/mm/transparent_hugepage/enabled reads "madvise" (Debian's
// default, among others), that default is 4 KiB pages, and a campaign,
// whose simulated device memory, caches and memos are read all over a
// heap of a few hundred MB, spends a good part of its time in page walks:
// on the 2-core machine offcard is measured on, `offcard check` ran about
// 8% faster with its heap advised (10% with the system set to "always").
//
// Advise grows the heap's address space by allocations that are never
// touched (so they cost no memory; they are 4 MiB each, because the runtime
// zeroes a large allocation whole when any page of it was used before),
// advises the heap mappings that hold them MADV_HUGEPAGE, and frees them:
// the runtime then places the heap's later objects in advised memory, up to
// that size. It does nothing where the kernel gives every mapping huge
// pages already ("always") or none ("never"), and off Linux. Memory the
// heap maps beyond the reservation is not advised.
package hugeheap
