// Package load drives historyd the way a host would, over loopback gRPC: it
// starts historyd as its own process, measures request latency and
// throughput at a given concurrency, and reads the process's resident
// memory from /proc.
package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Build compiles ./cmd/historyd of the module at repo into out.
func Build(ctx context.Context, repo, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/historyd")
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/historyd: %w\n%s", err, b)
	}
	return nil
}

// Server is a running historyd process and a client connection to it.
type Server struct {
	Addr string
	Pid  int
	Log  string
	Conn *grpc.ClientConn
	*Client
	cmd  *exec.Cmd
	done chan error
}

// ServeArgs are flags added to every `historyd serve` the bench starts.
// The default cap on a call's duration (30 s) would cut the slowest cold
// requests the bench exists to measure; it is lifted, and rows report
// any request that took longer than the default cap.
var ServeArgs = []string{"--max-call-duration", "10m"}

// DefaultCallCap is historyd's default --max-call-duration.
const DefaultCallCap = 30 * time.Second

// Start runs `bin serve --dsn dsn --listen 127.0.0.1:PORT` plus ServeArgs
// on a free loopback port, logging to logPath, and waits until its health
// service reports SERVING.
func Start(ctx context.Context, bin, dsn, logPath string, extraEnv ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the process is stopped by Stop, with SIGTERM.
	cmd := exec.Command(bin, append([]string{"serve", "--dsn", dsn, "--listen", addr}, ServeArgs...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), extraEnv...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Addr: addr, Pid: cmd.Process.Pid, Log: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logf.Close() }()
	conn, err := Dial(addr)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Conn = conn
	s.Client = NewClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return nil, fmt.Errorf("historyd exited during start (%v); log %s:\n%s", err, logPath, tailFile(logPath, 2000))
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := s.Health.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("historyd at %s not SERVING after 20s (last: %v %v); log %s:\n%s", addr, resp.GetStatus(), err, logPath, tailFile(logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Dial opens a plaintext loopback client connection that accepts
// responses of any size (a thread's whole history can be hundreds of MB).
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
	)
}

// Stop sends SIGTERM, waits up to 15 s for the process to exit, then kills
// it. It is safe to call more than once.
func (s *Server) Stop() error {
	if s.Conn != nil {
		s.Conn.Close()
		s.Conn = nil
	}
	if s.cmd == nil {
		return nil
	}
	cmd := s.cmd
	s.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("historyd exited with %v; log %s", err, s.Log)
		}
		return nil
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("historyd did not stop within 15s of SIGTERM; killed")
	}
}

// Mem is a process's resident memory, from /proc/<pid>/status.
type Mem struct {
	RSS int64 // VmRSS, bytes
	HWM int64 // VmHWM (peak RSS since start or the last ResetPeak), bytes
}

// ReadMem reads the process's VmRSS and VmHWM.
func ReadMem(pid int) (Mem, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return Mem{}, err
	}
	defer f.Close()
	var m Mem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, field := range []struct {
			name string
			dst  *int64
		}{{"VmRSS:", &m.RSS}, {"VmHWM:", &m.HWM}} {
			if rest, ok := strings.CutPrefix(line, field.name); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return m, fmt.Errorf("parse %q: %w", line, err)
				}
				*field.dst = kb * 1024
			}
		}
	}
	return m, sc.Err()
}

// CPUTime is the user plus system CPU time the process has used, from
// /proc/<pid>/stat (in USER_HZ ticks, 100 per second on Linux).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}

// ResetPeak resets the process's VmHWM to its current RSS (Linux
// /proc/<pid>/clear_refs, value 5).
func ResetPeak(pid int) error {
	return os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// LoadAvg returns the 1-, 5- and 15-minute load averages.
func LoadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}
