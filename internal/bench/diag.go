package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// procDiag is what bench --edges reads of a server process besides its
// CPU, to tell where a difference in CPU per delivered message comes
// from: its user and system time, context switches, read and write
// system calls (/proc/<pid>/status and io), and from its metrics its
// websocket writes (batches) and GC cycles.
type procDiag struct {
	user, sys      time.Duration
	volCS, involCS float64
	syscr, syscw   float64
	writes, gcs    float64
}

func (a procDiag) sub(b procDiag) procDiag {
	return procDiag{a.user - b.user, a.sys - b.sys, a.volCS - b.volCS, a.involCS - b.involCS,
		a.syscr - b.syscr, a.syscw - b.syscw, a.writes - b.writes, a.gcs - b.gcs}
}

func (a procDiag) add(b procDiag) procDiag {
	return procDiag{a.user + b.user, a.sys + b.sys, a.volCS + b.volCS, a.involCS + b.involCS,
		a.syscr + b.syscr, a.syscw + b.syscw, a.writes + b.writes, a.gcs + b.gcs}
}

// The metrics procDiag reads.
const (
	metricWrites = "fanoutd_write_batch_bytes_count"
	metricGCs    = "go_gc_duration_seconds_count"
)

// readDiag reads process pid's procDiag; metrics returns its metrics'
// samples by name.
func readDiag(pid int, metrics func() map[string]float64) procDiag {
	var d procDiag
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	if b, err := os.ReadFile(dir + "stat"); err == nil {
		d.user, d.sys, _ = procStatTimes(b)
	}
	fields := func(name string, f func(k string, v float64)) {
		b, err := os.ReadFile(dir + name)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				f(k, n)
			}
		}
	}
	// A process's context switches are its threads' (its own status
	// counts its main thread's only).
	tasks, _ := os.ReadDir(dir + "task")
	for _, t := range tasks {
		fields("task/"+t.Name()+"/status", func(k string, v float64) {
			switch k {
			case "voluntary_ctxt_switches":
				d.volCS += v
			case "nonvoluntary_ctxt_switches":
				d.involCS += v
			}
		})
	}
	fields("io", func(k string, v float64) {
		switch k {
		case "syscr":
			d.syscr = v
		case "syscw":
			d.syscw = v
		}
	})
	m := metrics()
	d.writes, d.gcs = m[metricWrites], m[metricGCs]
	return d
}

// gathered returns the samples of g's metrics that procDiag reads.
func gathered(g prometheus.Gatherer) func() map[string]float64 {
	return func() map[string]float64 {
		out := map[string]float64{}
		mfs, err := g.Gather()
		if err != nil {
			return out
		}
		for _, mf := range mfs {
			if len(mf.GetMetric()) == 0 {
				continue
			}
			m := mf.GetMetric()[0]
			if h := m.GetHistogram(); h != nil {
				out[mf.GetName()+"_count"] = float64(h.GetSampleCount())
			}
			if s := m.GetSummary(); s != nil {
				out[mf.GetName()+"_count"] = float64(s.GetSampleCount())
			}
		}
		return out
	}
}

// scraped returns the samples of the metrics at url (Prometheus text)
// that procDiag reads.
func scraped(url string) func() map[string]float64 {
	return func() map[string]float64 {
		out := map[string]float64{}
		r, err := http.Get(url)
		if err != nil {
			return out
		}
		defer r.Body.Close()
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			name, v, ok := strings.Cut(sc.Text(), " ")
			if ok && (name == metricWrites || name == metricGCs) {
				out[name], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		return out
	}
}

// printDiag prints the single process's and the edges' (summed) procDiag
// over the measured window, per 1000 delivered messages.
func printDiag(w io.Writer, one, edges procDiag, oneMsgs, edgeMsgs int64) {
	per := func(v float64, n int64) float64 { return 1000 * v / float64(max(n, 1)) }
	us := func(d time.Duration, n int64) float64 { return float64(d.Nanoseconds()) / float64(max(n, 1)) / 1000 }
	row := func(name string, f func(procDiag, int64) float64) {
		fmt.Fprintf(w, "%-34s %14.3f %16.3f\n", name, f(one, oneMsgs), f(edges, edgeMsgs))
	}
	fmt.Fprintln(w, "per delivered msg (server processes, edges summed):")
	row("  user CPU, µs", func(d procDiag, n int64) float64 { return us(d.user, n) })
	row("  system CPU, µs", func(d procDiag, n int64) float64 { return us(d.sys, n) })
	row("  websocket writes per 1000", func(d procDiag, n int64) float64 { return per(d.writes, n) })
	row("  read syscalls per 1000", func(d procDiag, n int64) float64 { return per(d.syscr, n) })
	row("  write syscalls per 1000", func(d procDiag, n int64) float64 { return per(d.syscw, n) })
	row("  voluntary ctx switches per 1000", func(d procDiag, n int64) float64 { return per(d.volCS, n) })
	row("  involuntary ctx sw. per 1000", func(d procDiag, n int64) float64 { return per(d.involCS, n) })
	row("  GC cycles per 1000", func(d procDiag, n int64) float64 { return per(d.gcs, n) })
}
