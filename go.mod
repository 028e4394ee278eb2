module github.com/offcard/offcard

go 1.26
