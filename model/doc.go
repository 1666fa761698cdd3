// Package model holds the allocation problem in plain Go: the devices, counter
// sets, nodes, pods and claims derived from the objects package input read
// (Build), their validation (Validate), and State, the feasibility kernel
// every search of the engine places devices through.
package model
