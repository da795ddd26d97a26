package deploy

import (
	"bufio"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// collectorPort is the OpenTelemetry collector's OTLP/gRPC port, the one
// port besides DNS and the database's that the NetworkPolicy lets historyd
// reach, and only on the collector's pods. historyd exports traces there
// once OTEL_EXPORTER_OTLP_ENDPOINT names the collector (docs/deploy.md,
// "Tracing").
const collectorPort int32 = 4317

// otelVariables are the OTEL_* variables historyd reads: its own
// (tracing.FromEnv) and those its OTLP exporters and SDK read. historyd
// ignores variables it does not know, so a misspelt
// OTEL_EXPORTER_OTLP_ENDPIONT would leave tracing silently off.
var otelVariables = func() map[string]bool {
	m := map[string]bool{
		"OTEL_SDK_DISABLED": true, "OTEL_TRACES_EXPORTER": true,
		"OTEL_TRACES_SAMPLER": true, "OTEL_TRACES_SAMPLER_ARG": true,
		"OTEL_SERVICE_NAME": true, "OTEL_RESOURCE_ATTRIBUTES": true,
		"OTEL_BSP_SCHEDULE_DELAY": true, "OTEL_BSP_EXPORT_TIMEOUT": true,
		"OTEL_BSP_MAX_QUEUE_SIZE": true, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": true,
	}
	for _, v := range []string{"ENDPOINT", "PROTOCOL", "HEADERS", "TIMEOUT", "COMPRESSION", "INSECURE",
		"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		m["OTEL_EXPORTER_OTLP_"+v] = true
		m["OTEL_EXPORTER_OTLP_TRACES_"+v] = true
	}
	return m
}()

// allowsPort reports whether an egress rule allows port.
func allowsPort(rule networkingv1.NetworkPolicyEgressRule, port int32) bool {
	for _, p := range rule.Ports {
		if p.Port != nil && int32(p.Port.IntValue()) == port {
			return true
		}
	}
	return false
}

// checkCollectorEgress: the rule letting historyd reach the collector
// allows that one port over TCP, to pods named by labels in a namespace
// named by label, never to every destination.
func checkCollectorEgress(t *testing.T, i int, rule networkingv1.NetworkPolicyEgressRule, pod *corev1.PodTemplateSpec) {
	t.Helper()
	for _, p := range rule.Ports {
		if p.Port == nil || int32(p.Port.IntValue()) != collectorPort || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			t.Errorf("egress rule %d (collector) allows %v; want TCP %d alone", i, p, collectorPort)
		}
	}
	if len(rule.To) == 0 {
		t.Errorf("egress rule %d (collector) allows port %d to every destination; name the collector's pods", i, collectorPort)
	}
	for _, peer := range rule.To {
		if peer.IPBlock != nil || peer.PodSelector == nil || len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0 || peer.NamespaceSelector == nil {
			t.Errorf("egress rule %d (collector): peer %+v; want the collector's pods by namespace and pod labels", i, peer)
			continue
		}
		if s, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err == nil && s.Matches(labels.Set(pod.Labels)) {
			t.Errorf("egress rule %d (collector): peer selector %s matches historyd's own pods", i, s)
		}
	}
}

// TestTracingSettings: the OTEL_* variables the manifests give historyd are
// ones it reads, and a collector they name is reached on the port the
// NetworkPolicy opens, over OTLP/gRPC; so is the one the ConfigMap's
// commented example names, which is what an operator uncomments.
func TestTracingSettings(t *testing.T) {
	for _, dir := range kustomizations(t) {
		t.Run(dir, func(t *testing.T) {
			o := render(t, dir)
			c := o.deployment(t).Spec.Template.Spec.Containers[0]
			env := resolveEnv(t, o, c)
			for name, v := range env {
				if strings.HasPrefix(name, "OTEL_") && !otelVariables[name] {
					t.Errorf("historyd reads no %s (set from %s)", name, v.source)
				}
			}
			for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
				if v, ok := env[name]; ok && v.known && v.value != "" {
					checkCollectorEndpoint(t, name, v.value)
				}
			}
			for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				if v, ok := env[name]; ok && v.known && v.value != "grpc" {
					t.Errorf("%s=%q; port %d is OTLP/gRPC's, want grpc", name, v.value, collectorPort)
				}
			}
		})
	}
	t.Run("historyd.env example", func(t *testing.T) {
		f, err := os.Open("base/historyd.env")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		found := false
		for sc := bufio.NewScanner(f); sc.Scan(); {
			line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "#"))
			if v, ok := strings.CutPrefix(line, "OTEL_EXPORTER_OTLP_ENDPOINT="); ok {
				found = true
				checkCollectorEndpoint(t, "historyd.env's OTEL_EXPORTER_OTLP_ENDPOINT", v)
			}
		}
		if !found {
			t.Error("base/historyd.env shows no OTEL_EXPORTER_OTLP_ENDPOINT, commented or not, for operators to set")
		}
	})
}

// checkCollectorEndpoint: an OTLP endpoint is a URL whose port is the one
// the NetworkPolicy opens.
func checkCollectorEndpoint(t *testing.T, name, v string) {
	t.Helper()
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		t.Errorf("%s=%q: want a URL such as http://otel-collector.monitoring.svc:%d", name, v, collectorPort)
		return
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || int32(p) != collectorPort {
		t.Errorf("%s=%q: port %q, but the NetworkPolicy lets historyd reach the collector on %d only", name, v, u.Port(), collectorPort)
	}
}
