package deploy

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// databasePorts is the port each kustomization lets historyd open
// connections to besides DNS: none in the base (an overlay decides),
// PostgreSQL's in postgres-direct, PgBouncer's in pgbouncer. A new overlay
// must say here which it uses.
var databasePorts = map[string]int32{
	"base":                     0,
	"overlays/postgres-direct": 5432,
	"overlays/pgbouncer":       6432,
}

// The checks below are what a working deployment depends on, beyond what
// the API types already enforce: probes on the metrics listener's port and
// paths, the securityContext of every container, selectors that select the
// pods, a drain that finishes before the kubelet kills the process, and
// Secrets mounted so that their updates reach historyd.
func TestInvariants(t *testing.T) {
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			o := render(t, dir)
			d := o.deployment(t)
			pod := &d.Spec.Template
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want historyd alone", len(pod.Spec.Containers))
			}
			c := pod.Spec.Containers[0]
			env := resolveEnv(t, o, c)
			ports := containerPorts(t, c)

			t.Run("selector", func(t *testing.T) { checkSelector(t, d) })
			t.Run("securityContext", func(t *testing.T) { checkSecurity(t, pod) })
			t.Run("listeners", func(t *testing.T) { checkListeners(t, env, ports) })
			t.Run("probes", func(t *testing.T) { checkProbes(t, c, ports) })
			t.Run("shutdown", func(t *testing.T) { checkShutdown(t, pod, c, env) })
			t.Run("resources", func(t *testing.T) { checkResources(t, c, env) })
			t.Run("secrets", func(t *testing.T) { checkSecrets(t, o, pod, c, env) })
			t.Run("services", func(t *testing.T) { checkServices(t, o, pod, ports) })
			t.Run("disruption budget", func(t *testing.T) { checkPDB(t, o, d) })
			t.Run("autoscaler", func(t *testing.T) { checkHPA(t, o, d) })
			t.Run("network policy", func(t *testing.T) { checkNetworkPolicy(t, o, dir, pod, ports) })
			t.Run("namespace", func(t *testing.T) { checkNamespace(t, o) })
		})
	}
}

// envValue is a container variable as the manifests define it: a literal
// (from the Deployment or a ConfigMap), or a reference whose value is not
// in the manifests (a Secret key, a field).
type envValue struct {
	value  string
	known  bool
	source string // "literal", "configmap NAME", "secret NAME/KEY", "field"
}

// resolveEnv follows envFrom and valueFrom to the rendered ConfigMaps, so
// the checks see what the container will see. Later entries win, as in
// Kubernetes: env over envFrom.
func resolveEnv(t *testing.T, o *objects, c corev1.Container) map[string]envValue {
	t.Helper()
	env := map[string]envValue{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, ok := o.configMaps[from.ConfigMapRef.Name]
			if !ok {
				t.Errorf("envFrom ConfigMap %q is not in the kustomization", from.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = envValue{value: v, known: true, source: "configmap " + cm.Name}
			}
		case from.SecretRef != nil:
			t.Errorf("envFrom Secret %q: its keys are not in the manifests, so the variables cannot be checked; name each with env[].valueFrom.secretKeyRef", from.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = envValue{value: e.Value, known: true, source: "literal"}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := o.configMaps[ref.Name]
			v, has := "", false
			if ok {
				v, has = cm.Data[ref.Key]
			}
			if !has {
				t.Errorf("%s: ConfigMap key %s/%s is not in the kustomization", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = envValue{value: v, known: has, source: "configmap " + ref.Name}
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = envValue{source: "secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key}
		default:
			env[e.Name] = envValue{source: "field"}
		}
	}
	return env
}

// containerPorts maps the container's port names to numbers; historyd's
// two listeners must be named grpc and metrics.
func containerPorts(t *testing.T, c corev1.Container) map[string]int32 {
	t.Helper()
	ports := map[string]int32{}
	for _, p := range c.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			t.Errorf("port %s: protocol %s, want TCP", p.Name, p.Protocol)
		}
		ports[p.Name] = p.ContainerPort
	}
	for _, name := range []string{"grpc", "metrics"} {
		if ports[name] == 0 {
			t.Fatalf("no container port named %s (ports %v)", name, ports)
		}
	}
	return ports
}

// resolvePort turns a named or numbered port into the container's number,
// 0 when the container has no such port.
func resolvePort(p intstr.IntOrString, ports map[string]int32) int32 {
	if p.Type == intstr.String {
		return ports[p.StrVal]
	}
	for _, n := range ports {
		if n == p.IntVal {
			return n
		}
	}
	return 0
}

func selects(t *testing.T, what string, sel *metav1.LabelSelector, podLabels map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	switch {
	case err != nil:
		t.Errorf("%s: selector: %v", what, err)
	case s.Empty():
		t.Errorf("%s: empty selector selects every pod in the namespace", what)
	case !s.Matches(labels.Set(podLabels)):
		t.Errorf("%s: selector %s does not match the pod labels %v", what, s, podLabels)
	}
}

func checkSelector(t *testing.T, d *appsv1.Deployment) {
	selects(t, "Deployment", d.Spec.Selector, d.Spec.Template.Labels)
	if d.Spec.Replicas != nil {
		t.Errorf("Deployment sets replicas %d; the HorizontalPodAutoscaler owns the count and each apply would reset it", *d.Spec.Replicas)
	}
	if s := d.Spec.Strategy; s.RollingUpdate == nil || s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update strategy %+v: want maxUnavailable 0, so capacity never drops during a rollout", s)
	}
}

func checkSecurity(t *testing.T, pod *corev1.PodTemplateSpec) {
	spec := pod.Spec
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("pod shares a host namespace")
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false; historyd never calls the API server")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks is not false; Kubernetes would inject HISTORYD_SERVICE_HOST, HISTORYD_PORT… for the Service named historyd")
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container %s: no securityContext", c.Name)
			continue
		}
		switch {
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
			t.Errorf("container %s: runAsNonRoot is not true", c.Name)
		case sc.RunAsUser == nil || *sc.RunAsUser == 0:
			t.Errorf("container %s: runAsUser unset or 0", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s: privileged", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: capabilities %+v, want drop [ALL] and nothing added", c.Name, sc.Capabilities)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s: seccompProfile is not RuntimeDefault", c.Name)
		}
	}
}

// listenPort parses a listen address from the environment: it must carry
// a port, and must not be a loopback address, which the kubelet's probes
// and other pods cannot reach.
func listenPort(t *testing.T, env map[string]envValue, name string) int32 {
	t.Helper()
	v, ok := env[name]
	if !ok || !v.known {
		t.Errorf("%s is not set in the manifests", name)
		return 0
	}
	host, port, err := net.SplitHostPort(v.value)
	if err != nil {
		t.Errorf("%s=%q: %v", name, v.value, err)
		return 0
	}
	if host == "localhost" || (net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()) {
		t.Errorf("%s=%q binds loopback, unreachable from outside the pod", name, v.value)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Errorf("%s=%q: port: %v", name, v.value, err)
	}
	return int32(n)
}

func checkListeners(t *testing.T, env map[string]envValue, ports map[string]int32) {
	if p := listenPort(t, env, "HISTORYD_LISTEN"); p != ports["grpc"] {
		t.Errorf("HISTORYD_LISTEN port %d, container port grpc %d", p, ports["grpc"])
	}
	if p := listenPort(t, env, "HISTORYD_METRICS_LISTEN"); p != ports["metrics"] {
		t.Errorf("HISTORYD_METRICS_LISTEN port %d, container port metrics %d", p, ports["metrics"])
	}
}

func checkProbes(t *testing.T, c corev1.Container, ports map[string]int32) {
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an HTTP GET of %s on the metrics port", p.name, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path {
			t.Errorf("%s: path %q, want %q", p.name, g.Path, p.path)
		}
		if got := resolvePort(g.Port, ports); got == 0 || got != ports["metrics"] {
			t.Errorf("%s: port %s is not the metrics port %d", p.name, g.Port.String(), ports["metrics"])
		}
		if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
			t.Errorf("%s: scheme %s; the metrics listener is plain HTTP", p.name, g.Scheme)
		}
	}
	if c.StartupProbe != nil && c.StartupProbe.HTTPGet != nil && c.StartupProbe.HTTPGet.Path == "/readyz" {
		t.Error("startupProbe on /readyz: a database outage at start would get the pod restarted, which does not cure it")
	}
}

// checkShutdown: the preStop sleep lets the endpoints controller take the
// pod out of the Services before SIGTERM; historyd then drains for
// HISTORYD_SHUTDOWN_GRACE. Both must fit in terminationGracePeriodSeconds,
// or the kubelet kills calls that were meant to finish.
func checkShutdown(t *testing.T, pod *corev1.PodTemplateSpec, c corev1.Container, env map[string]envValue) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		t.Fatal("no preStop sleep: SIGTERM could come before the pod leaves the Services' endpoints, and new calls would fail")
	}
	if c.Lifecycle.PreStop.Exec != nil {
		t.Error("preStop exec: the image has no shell or sleep binary")
	}
	sleep := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	grace := 10 * time.Second // historyd's default
	if v, ok := env["HISTORYD_SHUTDOWN_GRACE"]; ok {
		d, err := time.ParseDuration(v.value)
		if err != nil || !v.known {
			t.Fatalf("HISTORYD_SHUTDOWN_GRACE=%q (%s): %v", v.value, v.source, err)
		}
		grace = d
	}
	period := 30 * time.Second // Kubernetes' default
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		period = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if sleep+grace+2*time.Second > period {
		t.Errorf("preStop sleep %s + shutdown grace %s (+2s to exit) exceeds terminationGracePeriodSeconds %s", sleep, grace, period)
	}
}

// goSize parses a GOMEMLIMIT value: bytes with an optional B, KiB, MiB,
// GiB or TiB suffix, as the Go runtime accepts it.
func goSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}

func checkResources(t *testing.T, c corev1.Container, env map[string]envValue) {
	r := c.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := r.Requests[name]
		lim, hasLim := r.Limits[name]
		if !hasReq || !hasLim {
			t.Errorf("%s: want both a request and a limit (requests %v, limits %v)", name, r.Requests, r.Limits)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s above limit %s", name, req.String(), lim.String())
		}
	}
	memLimit := r.Limits[corev1.ResourceMemory]
	v, ok := env["GOMEMLIMIT"]
	if !ok || !v.known {
		t.Fatal("GOMEMLIMIT unset: the collector would not know the container's memory limit")
	}
	goLimit, err := goSize(v.value)
	if err != nil {
		t.Fatalf("GOMEMLIMIT: %v", err)
	}
	if goLimit >= memLimit.Value() {
		t.Errorf("GOMEMLIMIT %s (%d bytes) is not below limits.memory %s (%d bytes)", v.value, goLimit, memLimit.String(), memLimit.Value())
	}
	// The caches are bounded by HISTORYD_CACHE_BYTES (default a quarter of
	// GOMEMLIMIT) and are the largest thing historyd keeps; they must fit
	// below the request with the idle process (about 23 MB,
	// docs/benchmarks.md).
	cache := goLimit / 4
	if cv, ok := env["HISTORYD_CACHE_BYTES"]; ok {
		if cache, err = goSize(cv.value); err != nil {
			t.Fatalf("HISTORYD_CACHE_BYTES: %v", err)
		}
	}
	for _, old := range []string{"HISTORYD_CACHE_THREADS", "HISTORYD_CACHE_STATE_BYTES"} {
		if _, ok := env[old]; ok {
			t.Errorf("%s is deprecated: HISTORYD_CACHE_BYTES bounds the caches", old)
		}
	}
	memRequest := r.Requests[corev1.ResourceMemory]
	if idle := int64(23e6); cache+idle > memRequest.Value() {
		t.Errorf("caches %d bytes + idle RSS %d exceeds requests.memory %s", cache, idle, memRequest.String())
	}
}

// checkSecrets: the DSN and log salt only from Secrets; the certificate,
// key, token file and page token key from Secret volumes mounted whole (a
// subPath mount is never updated when the Secret changes), read-only, at
// the paths the variables name.
func checkSecrets(t *testing.T, o *objects, pod *corev1.PodTemplateSpec, c corev1.Container, env map[string]envValue) {
	for _, name := range []string{"HISTORYD_DSN", "HISTORYD_LOG_THREAD_SALT"} {
		v, ok := env[name]
		if name == "HISTORYD_DSN" && !ok {
			t.Errorf("HISTORYD_DSN is not set")
		}
		if ok && !strings.HasPrefix(v.source, "secret ") {
			t.Errorf("%s comes from %s; it holds a secret and must come from a Secret", name, v.source)
		}
	}
	// Shadowed by the Secret or not, a secret in a ConfigMap is readable by
	// everyone who may read ConfigMaps.
	for _, cm := range o.configMaps {
		for _, k := range []string{"HISTORYD_DSN", "HISTORYD_LOG_THREAD_SALT"} {
			if _, ok := cm.Data[k]; ok {
				t.Errorf("ConfigMap %s holds %s; it belongs in a Secret", cm.Name, k)
			}
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		if v, ok := volumes[m.Name]; ok && v.Secret != nil && m.SubPath != "" {
			t.Errorf("volume %s is mounted with subPath %q: Kubernetes never updates subPath mounts, so rotations would not reach historyd", m.Name, m.SubPath)
		}
	}
	wantFiles := map[string]string{
		"HISTORYD_TLS_CERT": "tls.crt", "HISTORYD_TLS_KEY": "tls.key", // a kubernetes.io/tls Secret's keys
		"HISTORYD_AUTH_TOKENS": "", "HISTORYD_TLS_CLIENT_CA": "",
		// Replicas behind one Service continue each other's listings
		// only with one key.
		"HISTORYD_PAGE_TOKEN_KEY_FILE": "",
	}
	for name, key := range wantFiles {
		v, ok := env[name]
		if !ok {
			if name == "HISTORYD_TLS_CLIENT_CA" {
				continue // mutual TLS is optional
			}
			t.Errorf("%s is not set; a shared deployment serves TLS with tokens, and its replicas share a page token key (docs/security.md)", name)
			continue
		}
		file := path.Clean(v.value)
		var mount *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if path.Dir(file) == path.Clean(m.MountPath) {
				mount = &c.VolumeMounts[i]
			}
		}
		if mount == nil {
			t.Errorf("%s=%s: no volume is mounted at %s", name, file, path.Dir(file))
			continue
		}
		vol := volumes[mount.Name]
		if vol.Secret == nil {
			t.Errorf("%s=%s: volume %s is not a Secret", name, file, mount.Name)
			continue
		}
		if !mount.ReadOnly {
			t.Errorf("%s: mount %s is not read-only", name, mount.Name)
		}
		base := path.Base(file)
		if key != "" && base != key {
			t.Errorf("%s=%s: a kubernetes.io/tls Secret's key is %s", name, file, key)
		}
		if items := vol.Secret.Items; len(items) > 0 {
			found := false
			for _, it := range items {
				found = found || it.Path == base
			}
			if !found {
				t.Errorf("%s=%s: volume %s projects no %s", name, file, mount.Name, base)
			}
		}
	}
}

func checkServices(t *testing.T, o *objects, pod *corev1.PodTemplateSpec, ports map[string]int32) {
	var headless, clusterIP int
	for _, s := range o.services {
		selects(t, "Service "+s.Name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, pod.Labels)
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			n := resolvePort(target, ports)
			switch {
			case n == 0:
				t.Errorf("Service %s port %s: target %s is no container port", s.Name, p.Name, target.String())
			case n == ports["metrics"]:
				t.Errorf("Service %s exposes the metrics port, which is unauthenticated; Prometheus scrapes pods", s.Name)
			case n != ports["grpc"]:
				t.Errorf("Service %s port %s: target %d is not the gRPC port %d", s.Name, p.Name, n, ports["grpc"])
			}
		}
		switch {
		case s.Spec.ClusterIP == corev1.ClusterIPNone:
			headless++
			if s.Spec.PublishNotReadyAddresses {
				t.Errorf("headless Service %s publishes replicas that are not ready", s.Name)
			}
		case s.Spec.Type == "" || s.Spec.Type == corev1.ServiceTypeClusterIP:
			clusterIP++
		}
	}
	if headless != 1 || clusterIP != 1 {
		t.Errorf("%d headless and %d ClusterIP Services, want one of each", headless, clusterIP)
	}
	// Prometheus finds the metrics port through the pod's annotations.
	if a := pod.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(ports["metrics"])) || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v: want prometheus.io/scrape true, port %d, path /metrics", a, ports["metrics"])
	}
}

func checkPDB(t *testing.T, o *objects, d *appsv1.Deployment) {
	if len(o.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want one", len(o.pdbs))
	}
	p := o.pdbs[0]
	selects(t, "PodDisruptionBudget "+p.Name, p.Spec.Selector, d.Spec.Template.Labels)
	switch {
	case p.Spec.MaxUnavailable != nil:
		if p.Spec.MaxUnavailable.Type == intstr.Int && p.Spec.MaxUnavailable.IntVal < 1 {
			t.Errorf("maxUnavailable %s blocks every drain", p.Spec.MaxUnavailable.String())
		}
	case p.Spec.MinAvailable != nil:
		if len(o.hpas) == 1 && o.hpas[0].Spec.MinReplicas != nil && p.Spec.MinAvailable.Type == intstr.Int && p.Spec.MinAvailable.IntVal >= *o.hpas[0].Spec.MinReplicas {
			t.Errorf("minAvailable %d with as few as %d replicas blocks every drain", p.Spec.MinAvailable.IntVal, *o.hpas[0].Spec.MinReplicas)
		}
	default:
		t.Error("neither maxUnavailable nor minAvailable")
	}
}

func checkHPA(t *testing.T, o *objects, d *appsv1.Deployment) {
	if len(o.hpas) != 1 {
		t.Fatalf("%d HorizontalPodAutoscalers, want one", len(o.hpas))
	}
	h := o.hpas[0]
	if ref := h.Spec.ScaleTargetRef; ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("scaleTargetRef %+v, want apps/v1 Deployment %s", ref, d.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
		t.Error("minReplicas below 2: one replica's restart would be an outage")
	}
	cpu := false
	for _, m := range h.Spec.Metrics {
		if m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil {
			cpu = true
		}
	}
	if !cpu {
		t.Error("no CPU utilization metric")
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
			t.Errorf("container %s has no CPU request: utilization is a share of it", c.Name)
		}
	}
}

func checkNetworkPolicy(t *testing.T, o *objects, dir string, pod *corev1.PodTemplateSpec, ports map[string]int32) {
	if len(o.netpols) != 1 {
		t.Fatalf("%d NetworkPolicies, want one", len(o.netpols))
	}
	np := o.netpols[0]
	selects(t, "NetworkPolicy "+np.Name, &np.Spec.PodSelector, pod.Labels)
	types := map[string]bool{}
	for _, p := range np.Spec.PolicyTypes {
		types[string(p)] = true
	}
	if !types["Ingress"] || !types["Egress"] {
		t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	admitted := map[int32]bool{}
	for i, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 || len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d admits every source or every port", i)
		}
		var rulePorts []int32
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Errorf("ingress rule %d: a port entry without a port admits all", i)
				continue
			}
			n := resolvePort(*p.Port, ports)
			if n == 0 {
				t.Errorf("ingress rule %d: port %s is no container port", i, p.Port.String())
			}
			rulePorts = append(rulePorts, n)
			admitted[n] = true
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				t.Errorf("ingress rule %d admits an IP block %s; admit pods by label", i, peer.IPBlock.CIDR)
			}
			if peer.PodSelector == nil || len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0 {
				t.Errorf("ingress rule %d: a peer without a pod selector admits every pod", i)
			} else if s, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err == nil && s.Matches(labels.Set(pod.Labels)) {
				t.Errorf("ingress rule %d: peer selector %s matches historyd's own pods", i, s)
			}
		}
		for _, n := range rulePorts {
			// Hosts must not reach the unauthenticated metrics listener, nor
			// Prometheus the gRPC port: one port per rule.
			if n != rulePorts[0] {
				t.Errorf("ingress rule %d admits ports %v together; give hosts and Prometheus a rule each", i, rulePorts)
				break
			}
		}
		if len(rulePorts) > 0 && rulePorts[0] == ports["metrics"] {
			for _, peer := range rule.From {
				if peer.NamespaceSelector == nil {
					t.Errorf("ingress rule %d (metrics): want Prometheus named by namespace and pod labels", i)
				}
			}
		}
	}
	if !admitted[ports["grpc"]] || !admitted[ports["metrics"]] || len(admitted) != 2 {
		t.Errorf("ingress admits ports %v, want exactly gRPC %d and metrics %d", admitted, ports["grpc"], ports["metrics"])
	}

	want, known := databasePorts[dir]
	if !known {
		t.Fatalf("%s: say in databasePorts which port this overlay lets historyd reach its database on", dir)
	}
	dns := map[corev1.Protocol]bool{}
	var other []int32
	collectorRules := 0
	for i, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 {
			t.Errorf("egress rule %d allows every port", i)
		}
		if allowsPort(rule, collectorPort) {
			collectorRules++
			checkCollectorEgress(t, i, rule, pod)
			continue
		}
		for _, p := range rule.Ports {
			if p.Port == nil {
				t.Errorf("egress rule %d: a port entry without a port allows all", i)
				continue
			}
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if p.Port.IntValue() == 53 {
				dns[proto] = true
			} else {
				other = append(other, int32(p.Port.IntValue()))
			}
		}
	}
	if !dns[corev1.ProtocolUDP] || !dns[corev1.ProtocolTCP] {
		t.Errorf("egress allows DNS over %v, want UDP and TCP port 53", dns)
	}
	if collectorRules != 1 {
		t.Errorf("%d egress rules allow the OpenTelemetry collector's port %d, want one", collectorRules, collectorPort)
	}
	switch {
	case want == 0 && len(other) > 0:
		t.Errorf("egress allows ports %v; the base leaves the database's port to the overlays", other)
	case want != 0 && (len(other) != 1 || other[0] != want):
		t.Errorf("egress allows ports %v besides DNS, want only %d", other, want)
	}
}

func checkNamespace(t *testing.T, o *objects) {
	if len(o.namespaces) != 1 {
		t.Fatalf("%d Namespaces, want historyd's own", len(o.namespaces))
	}
	ns := o.namespaces[0]
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("Namespace %s does not enforce the restricted Pod Security Standard", ns.Name)
	}
	for obj, got := range o.namespaced {
		if got != ns.Name {
			t.Errorf("%s is in namespace %q, not %q", obj, got, ns.Name)
		}
	}
}
