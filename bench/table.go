package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints one line per instance and policy.
func WriteTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tPOLICY\tADMITTED\t%\tDEVICES\tUSED\tFREE\tUTIL\tTIME\tFIRST ANSWER\tHEAP MiB\tOPTIMAL/GAP\t")
	last := ""
	for _, r := range rep.Rows {
		inst := r.Instance
		if inst == last {
			inst = ""
		}
		last = r.Instance
		opt := ""
		if r.Optimal != nil {
			if *r.Optimal {
				opt = "optimal"
			} else {
				opt = fmt.Sprintf("gap %.1f%% (bound %d)", 100**r.Gap, *r.Bound)
			}
		}
		if r.Replay != nil && r.Replay.Windows > 0 && isDrasat(r.Policy) {
			opt += fmt.Sprintf(" %d/%d windows optimal", r.Replay.OptimalWindows, r.Replay.Windows)
		}
		first := "" // the baselines' one answer is their TIME
		if r.FirstAnswer != nil {
			first = fmt.Sprintf("%d at %s", *r.FirstAnswer, fmtMs(r.FirstAnswerMs))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.1f\t%d\t%d %s\t%d\t%.1f%% %s\t%s\t%s\t%.1f\t%s\t\n",
			inst, r.Policy, r.Admitted, r.Claims, r.AdmittedPct, r.Devices, r.UnitsUsed, r.UnitName, r.UnitsFree,
			100*r.Util, r.UtilName, fmtMs(r.WallMs), first, r.PeakHeapMiB, opt)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Rows {
		if r.Replay != nil {
			fmt.Fprintf(w, "%s, %s: %d/%d tasks admitted, %.1f GPU-hours stranded, whole GPUs free mean %.1f min %d",
				r.Instance, r.Policy, r.Admitted, r.Claims, r.Replay.StrandedGPUHours, r.Replay.MeanFreeGPUs, r.Replay.MinFreeGPUs)
			if r.Replay.CPUTasks > 0 {
				fmt.Fprintf(w, ", CPU-only tasks placed by the scheduler %d/%d", r.Replay.CPUTasksPlaced, r.Replay.CPUTasks)
			}
			if r.Scenario == "openb-wait" {
				fmt.Fprintf(w, ", wait mean %.0fs p99 %.0fs, %d dropped, %d never admitted", r.Replay.MeanWaitS, r.Replay.P99WaitS, r.Replay.Dropped, r.Replay.Unplaced)
			}
			if r.Replay.HeldTasks > 0 {
				fmt.Fprintf(w, ", %d tasks held back (mean wait of those admitted %.0fs)", r.Replay.HeldTasks, r.Replay.MeanHeldWaitS)
			}
			if r.Replay.FragExactWindows > 0 {
				fmt.Fprintf(w, ", placement proven least fragmented in %d/%d windows", r.Replay.FragExactWindows, r.Replay.Windows)
			}
			if r.Replay.ReservedWindows > 0 {
				fmt.Fprintf(w, ", a node reserved in %d windows", r.Replay.ReservedWindows)
			}
			fmt.Fprintln(w)
		}
		if in := r.Inflation; in != nil {
			fmt.Fprintf(w, "%s, %s: %d/%d tasks admitted; at %.0f%% arrived: %.1f%% GPUs unallocated, %.1f%% fragmented (%.1f%% of the unallocated)",
				r.Instance, r.Policy, r.Admitted, r.Claims, in.At100.ArrivedPct, in.At100.UnallocatedPct, in.At100.FragPct, in.At100.FragOfFreePct)
			if in.CPUTasks > 0 {
				fmt.Fprintf(w, "; CPU-only tasks placed by the scheduler %d/%d", in.CPUTasksPlaced, in.CPUTasks)
			}
			if isDrasat(r.Policy) {
				fmt.Fprintf(w, "; %d/%d batches optimal", in.OptimalBatches, in.Batches)
				if in.FragExactBatches > 0 {
					fmt.Fprintf(w, ", placement proven least fragmented in %d", in.FragExactBatches)
				}
			}
			fmt.Fprintln(w)
		}
	}
	writeResearchLines(w, rep) // research.go
	_, err := fmt.Fprintf(w, "%s/%s, %d CPUs, %s; median of %d run(s); peak RSS %.0f MiB\n",
		rep.Machine.GOOS, rep.Machine.GOARCH, rep.Machine.CPUs, rep.Machine.GoVersion, rep.Repeat, rep.MaxRSSMiB)
	return err
}

func fmtMs(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.1fs", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.2fs", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return fmt.Sprintf("%.2fms", ms)
	}
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
