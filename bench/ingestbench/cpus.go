package ingestbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/compute/plugbuild"
	"github.com/sluicedb/sluice/internal/freeport"
	"github.com/sluicedb/sluice/luajit"
)

// runCPUs runs the ingest cases once per CPU count with the server in a
// child process (Options.CPUs).
func runCPUs(ctx context.Context, opts Options, dir string, bodies [][]byte, logw io.Writer) ([]Result, error) {
	if opts.Sluice == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Sluice = exe
	}
	var out []Result
	for _, c := range opts.Cases {
		if c == "query" || c == "range" {
			for _, p := range opts.CPUs {
				res, err := childQuery(ctx, c, filepath.Join(dir, fmt.Sprintf("%s-%d", c, p)), p, opts)
				if err != nil {
					return out, fmt.Errorf("case %s, %d CPUs: %w", c, p, err)
				}
				fmt.Fprintf(logw, "%s\n", Format([]Result{res}))
				out = append(out, res)
			}
			continue
		}
		yaml, note, err := caseConfig(c, dir)
		if err != nil {
			return out, fmt.Errorf("case %s: %w", c, err)
		}
		if note != "" {
			res := Result{Case: c, Note: note}
			fmt.Fprintf(logw, "%s\n", Format([]Result{res}))
			out = append(out, res)
			continue
		}
		for _, p := range opts.CPUs {
			res, err := childCase(ctx, c, yaml, filepath.Join(dir, fmt.Sprintf("%s-%d", c, p)), p, bodies, opts)
			if err != nil {
				return out, fmt.Errorf("case %s, %d CPUs: %w", c, p, err)
			}
			fmt.Fprintf(logw, "%s\n", Format([]Result{res}))
			out = append(out, res)
		}
	}
	return out, nil
}

// caseConfig is the server config of an ingest case, or why it is skipped.
func caseConfig(c, dir string) (yaml, skipped string, err error) {
	switch c {
	case "none":
		return configYAML(""), "", nil
	case "lua":
		return configYAML(luaColumn), "", nil
	case "luajit":
		if !luajit.Available {
			return "", "skipped: " + luajit.ErrUnavailable.Error(), nil
		}
		return configYAML(strings.Replace(luaColumn, "type: float64", "type: float64\n        engine: luajit", 1)), "", nil
	case "plugin":
		so, err := plugbuild.BuildFile(dir, "double.so", pluginSource)
		if err != nil {
			return "", "skipped: " + err.Error(), nil
		}
		return configYAML(fmt.Sprintf("\n    computed:\n      - name: score2\n        type: float64\n        func: %s\n        funcname: Double\n", so)), "", nil
	}
	return "", "", fmt.Errorf("unknown case %q (want none, lua, luajit or plugin)", c)
}

// childCase runs one case against a server process with GOMAXPROCS=p,
// pinned to cores 0..p-1, the clients (this process) pinned to the others
// when there are others.
func childCase(ctx context.Context, name, yaml, dir string, p int, bodies [][]byte, opts Options) (Result, error) {
	r, note, unpin, err := startChild(yaml, dir, p, opts)
	if err != nil {
		return Result{}, err
	}
	defer unpin()
	res, err := load(ctx, name, r, bodies, opts)
	res.CPUs, res.Note = p, note
	return res, err
}

// childQuery runs a query case (queryRows) against a server process as
// childCase does.
func childQuery(ctx context.Context, name, dir string, p int, opts Options) (Result, error) {
	r, note, unpin, err := startChild(configYAML(""), dir, p, opts)
	if err != nil {
		return Result{}, err
	}
	defer r.stop()
	defer unpin()
	res, err := queryRows(ctx, name, r, opts)
	res.CPUs, res.Note = p, res.Note+"; "+note
	return res, err
}

// startChild starts a server process with GOMAXPROCS=p, pinned to cores
// 0..p-1 and this process to the others when there are others (unpin
// undoes that), and waits until it answers.
func startChild(yaml, dir string, p int, opts Options) (r *running, note string, unpin func(), err error) {
	unpin = func() {}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", unpin, err
	}
	cfgPath := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		return nil, "", unpin, err
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, "", unpin, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append(append([]string{}, opts.SluiceArgs...), "serve", "--config", cfgPath, "--data", filepath.Join(dir, "data"), "--listen", addr, "--log-level", "warn")
	exe := opts.Sluice
	n := runtime.NumCPU()
	pinned := false
	if taskset, err := exec.LookPath("taskset"); err == nil && p < n {
		args = append([]string{"-c", cpuList(0, p), exe}, args...)
		exe, pinned = taskset, true
		note = fmt.Sprintf("server on cores %s, clients on %s", cpuList(0, p), cpuList(p, n))
	} else {
		note = fmt.Sprintf("server and clients share the %d cores", n)
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, "", unpin, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(p))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", unpin, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return nil
	}
	url := "http://" + addr
	ready := false
	for range 600 {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			ready = true
			break
		}
		select {
		case <-done:
			return nil, "", unpin, fmt.Errorf("the server exited; see %s", logf.Name())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !ready {
		stop()
		return nil, "", unpin, errors.New("the server did not start")
	}
	if pinned {
		restore, err := pinSelf(p, n)
		if err != nil {
			note += fmt.Sprintf(" (clients not pinned: %v)", err)
		} else {
			unpin = restore
		}
	}
	pid := cmd.Process.Pid
	return &running{url: url, stop: stop, cpu: func() time.Duration { return procCPU(pid) }}, note, unpin, nil
}

// cpuList is the taskset list of cores lo..hi-1.
func cpuList(lo, hi int) string {
	if hi-lo == 1 {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi-1)
}

// pinSelf pins every thread of this process to cores lo..hi-1 (threads
// started later inherit it) and returns what undoes it.
func pinSelf(lo, hi int) (restore func(), err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	for c := lo; c < hi; c++ {
		set.Set(c)
	}
	apply := func(s *unix.CPUSet) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, s); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
		return nil
	}
	if err := apply(&set); err != nil {
		apply(&old)
		return nil, err
	}
	return func() { apply(&old) }, nil
}

// procCPU is the user+sys CPU time of process pid (/proc/PID/stat, in
// clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
