module github.com/offcard/offcard

go 1.26.0

require (
	github.com/dlclark/regexp2/v2 v2.13.0
	github.com/leanovate/gopter v0.2.11
	github.com/x448/float16 v0.8.4
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
	golang.org/x/text v0.44.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/image v0.30.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

require github.com/ebitengine/purego v0.11.3

require (
	github.com/stretchr/testify v1.11.1
	gonum.org/v1/gonum v0.17.0
)
