module github.com/symmem/symmem

go 1.26.8

require golang.org/x/sys v0.49.0
