package main

// version is set at build time (make build, make image:
// -ldflags "-X main.version=...").
var version = "dev"
