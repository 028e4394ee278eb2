module github.com/offcard/offcard

go 1.26.0

require (
	github.com/dlclark/regexp2/v2 v2.13.0
	github.com/leanovate/gopter v0.2.11
	github.com/x448/float16 v0.8.4
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
	golang.org/x/text v0.44.0
)

require github.com/ebitengine/purego v0.11.3

require gonum.org/v1/gonum v0.17.0
