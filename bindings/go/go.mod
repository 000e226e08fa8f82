module github.com/redlock-quorum/redlock/bindings/go

go 1.22
