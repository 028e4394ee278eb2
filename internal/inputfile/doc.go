// Package inputfile opens the files offcard reads from its users (and from
// whoever wrote them): config.json, tokenizer.json, dumps, scripts,
// safetensors checkpoints. Each must be a regular file (a named pipe would
// block a read forever, a device such as /dev/zero would never end) no
// larger than a bound its reader states, and it is checked so before a
// byte is read:
//
//   - Open opens without blocking (O_NONBLOCK, so opening a FIFO returns at
//     once), fstat()s the descriptor it got (so a symlink is judged by what
//     it points to, and a file swapped after a stat is judged as opened),
//     and refuses anything but a regular file and any size over the bound.
//   - ReadFile reads a whole file so opened, never more than the bound even
//     when the file grows while it is read.
//
// Errors name the path and say what was wrong ("not a regular file (a
// named pipe)", "12.0 GiB, more than the 64.0 MiB a config.json may be").
// It imports internal/membudget (for sizes in messages).
package inputfile
