//go:build !race

package k8s

const raceDetector = false
