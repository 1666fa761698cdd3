package gen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MIGFamilies are the named claim mixes of the mig scenario (--mig-family).
// Each is a MIGConfig preset; --mig-mix changes single settings of it.
var MIGFamilies = []string{"default", "independent", "simple", "whole", "count", "dense", "rich"}

// MIGFamilyConfig returns the mig scenario's configuration for a family
// ("" is default):
//
//   - default: a quarter of the GPUs hold 1–2 MIG devices of any profile
//     but the whole GPU; a fifth of the claims ask for 2–4 devices, half of
//     them on one GPU (matchAttribute parentUUID);
//   - independent: the mix of the independent generator that drasat's
//     optimality was first checked against: 35 % multi-device claims, 80 %
//     of them on one GPU, 6 % whole-GPU and 4 % two-GPU claims, 1–3 small
//     MIG devices (one or two memory slices) on a quarter of the GPUs;
//   - simple: single-device MIG claims only;
//   - whole: 15 % whole-GPU and 10 % two-GPU claims;
//   - count: 25 % of the claims ask for 2–3 devices of one profile in one
//     request (count > 1);
//   - dense: 1–3 small MIG devices already allocated on 60 % of the GPUs;
//   - rich: 40 % of the claims written as the drivers' users write them
//     (firstAvailable, two requests or count 2 on one GPU, CEL on the
//     MIG device's memory capacity and productName; MIGConfig.Rich).
func MIGFamilyConfig(family string, nodes, gpus, claims int, seed uint64) (MIGConfig, error) {
	cfg := DefaultMIG(nodes, gpus, claims, seed)
	switch family {
	case "", "default":
	case "independent":
		cfg.MultiDevice, cfg.MatchShare = 0.35, 0.8
		cfg.WholeGPU, cfg.TwoGPU = 0.06, 0.04
		cfg.PreallocMax, cfg.PreallocSmall = 3, true
	case "simple":
		cfg.MultiDevice = 0
	case "whole":
		cfg.WholeGPU, cfg.TwoGPU = 0.15, 0.10
	case "count":
		cfg.Count = 0.25
	case "dense":
		cfg.Fragmented, cfg.PreallocMax, cfg.PreallocSmall = 0.6, 3, true
	case "rich":
		cfg.Rich = 0.4
	default:
		return cfg, fmt.Errorf("mig family %q: want one of %s", family, strings.Join(MIGFamilies, ", "))
	}
	return cfg, nil
}

// MIGMixKeys are the settings --mig-mix may change, and what each sets.
var MIGMixKeys = map[string]string{
	"multi":          "fraction of claims asking for 2–4 MIG devices in separate requests",
	"match":          "share of those multi-device claims kept on one GPU (matchAttribute parentUUID)",
	"whole":          "fraction of claims asking for one whole GPU",
	"two-gpu":        "fraction of claims asking for two whole GPUs (one request, count 2)",
	"count":          "fraction of claims asking for 2–3 MIG devices of one profile (one request, count > 1)",
	"prealloc":       "fraction of GPUs that already hold MIG devices",
	"prealloc-max":   "most MIG devices already allocated on such a GPU (at least 1)",
	"prealloc-small": "1: the devices already allocated are small (one or two memory slices); 0: any profile but the whole GPU",
	"pod-cpus":       "CPUs of every node, and a pod (1, 2 or 4 CPUs, 4–32Gi) for every pending claim; 0: no pods",
}

// ParseMIGMix reads "key=value[,key=value]" (MIGMixKeys).
func ParseMIGMix(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return nil, fmt.Errorf("mig mix %q: want KEY=VALUE", part)
		}
		if _, known := MIGMixKeys[k]; !known {
			return nil, fmt.Errorf("mig mix %q: unknown key %q (want one of %s)", part, k, strings.Join(mixKeys(), ", "))
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		integer := x == float64(int(x))
		if err != nil || x < 0 || (k != "prealloc-max" && k != "pod-cpus" && x > 1) || (k == "prealloc-max" && (x < 1 || x > 7 || !integer)) ||
			(k == "pod-cpus" && (x > 4096 || !integer)) {
			return nil, fmt.Errorf("mig mix %q: bad value for %s", part, k)
		}
		out[k] = x
	}
	return out, nil
}

func mixKeys() []string {
	var ks []string
	for k := range MIGMixKeys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ApplyMIGMix sets the mix's settings on cfg, and checks that the claim
// shares still add up to at most one.
func ApplyMIGMix(cfg *MIGConfig, mix map[string]float64) error {
	for k, v := range mix {
		switch k {
		case "multi":
			cfg.MultiDevice = v
		case "match":
			cfg.MatchShare = v
		case "whole":
			cfg.WholeGPU = v
		case "two-gpu":
			cfg.TwoGPU = v
		case "count":
			cfg.Count = v
		case "prealloc":
			cfg.Fragmented = v
		case "prealloc-max":
			cfg.PreallocMax = int(v)
		case "prealloc-small":
			cfg.PreallocSmall = v > 0
		case "pod-cpus":
			cfg.PodCPUs = int(v)
		}
	}
	if cfg.WholeGPU+cfg.TwoGPU+cfg.Count > 1 {
		return fmt.Errorf("mig mix: whole + two-gpu + count = %g, more than all claims", cfg.WholeGPU+cfg.TwoGPU+cfg.Count)
	}
	if v, ok := mix["match"]; ok && v == 0 {
		cfg.MatchShare = -1 // none on one GPU (a zero MatchShare means one half)
	}
	return nil
}

// MixName is "key=value,..." in key order, "" for no settings.
func MixName(mix map[string]float64) string {
	var parts []string
	for _, k := range mixKeys() {
		if v, ok := mix[k]; ok {
			parts = append(parts, k+"="+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}
