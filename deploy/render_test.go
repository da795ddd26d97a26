package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizations lists what is rendered: the base, and every overlay under
// overlays/, found by looking, so that a new overlay is checked without
// being registered anywhere.
func kustomizations(t *testing.T) []string {
	t.Helper()
	overlays, err := filepath.Glob("overlays/*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(overlays) == 0 {
		t.Fatal("no overlays/*/kustomization.yaml found; run the tests from deploy/")
	}
	dirs := []string{"base"}
	for _, k := range overlays {
		dirs = append(dirs, filepath.Dir(k))
	}
	return dirs
}

// objects is one rendered kustomization, decoded into the API types.
type objects struct {
	namespaces      []*corev1.Namespace
	serviceAccounts []*corev1.ServiceAccount
	configMaps      map[string]*corev1.ConfigMap
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	netpols         []*networkingv1.NetworkPolicy
	// namespaced holds each namespaced object's kind/name and namespace.
	namespaced map[string]string
}

// decoder decodes the kinds historyd's manifests may contain, refusing
// unknown and duplicate fields (apimachinery's strict mode, which also
// matches field names case-sensitively, unlike encoding/json). A kind
// outside the scheme is an error too: adding one means registering it
// here and checking it.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// render builds dir with kustomize's library, as `kubectl apply -k` would,
// and decodes every object.
func render(t *testing.T, dir string) *objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	o := &objects{configMaps: map[string]*corev1.ConfigMap{}, namespaced: map[string]string{}}
	for _, r := range rm.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %s: %v", dir, r.CurId(), err)
		}
		obj, gvk, err := decoder.Decode(y, nil, nil)
		if err != nil {
			t.Errorf("%s: %s does not decode strictly as a Kubernetes object: %v", dir, r.CurId(), err)
			continue
		}
		if err := o.add(obj); err != nil {
			t.Errorf("%s: %s (%s): %v", dir, r.CurId(), gvk, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return o
}

func (o *objects) add(obj runtime.Object) error {
	switch v := obj.(type) {
	case *corev1.Namespace:
		o.namespaces = append(o.namespaces, v)
		return nil
	case *corev1.ServiceAccount:
		o.serviceAccounts = append(o.serviceAccounts, v)
		o.namespaced["ServiceAccount/"+v.Name] = v.Namespace
	case *corev1.ConfigMap:
		o.configMaps[v.Name] = v
		o.namespaced["ConfigMap/"+v.Name] = v.Namespace
	case *appsv1.Deployment:
		o.deployments = append(o.deployments, v)
		o.namespaced["Deployment/"+v.Name] = v.Namespace
	case *corev1.Service:
		o.services = append(o.services, v)
		o.namespaced["Service/"+v.Name] = v.Namespace
	case *policyv1.PodDisruptionBudget:
		o.pdbs = append(o.pdbs, v)
		o.namespaced["PodDisruptionBudget/"+v.Name] = v.Namespace
	case *autoscalingv2.HorizontalPodAutoscaler:
		o.hpas = append(o.hpas, v)
		o.namespaced["HorizontalPodAutoscaler/"+v.Name] = v.Namespace
	case *networkingv1.NetworkPolicy:
		o.netpols = append(o.netpols, v)
		o.namespaced["NetworkPolicy/"+v.Name] = v.Namespace
	default:
		return fmt.Errorf("kind %T is not checked by these tests; add it to objects and check it", obj)
	}
	return nil
}

// deployment is the one Deployment every kustomization must have.
func (o *objects) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	if len(o.deployments) != 1 {
		t.Fatalf("%d Deployments, want exactly one", len(o.deployments))
	}
	return o.deployments[0]
}

// The decoder must refuse what a typo produces, or the strict decoding
// the other tests rely on proves nothing.
func TestDecoderIsStrict(t *testing.T) {
	valid := `apiVersion: v1
kind: Service
metadata:
  name: s
spec:
  selector:
    app: x
  ports:
    - port: 80
`
	if _, _, err := decoder.Decode([]byte(valid), nil, nil); err != nil {
		t.Fatalf("valid Service refused: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":      valid + "  sessionAfinity: ClientIP\n",
		"mis-cased field":    valid + "  ClusterIP: None\n",
		"duplicate field":    valid + "  type: ClusterIP\n  type: NodePort\n",
		"misplaced field":    strings.Replace(valid, "spec:\n", "spec:\n  replicas: 2\n", 1),
		"unregistered kind":  "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n",
		"wrong value type":   strings.Replace(valid, "port: 80", "port: [80]", 1),
		"unknown apiVersion": strings.Replace(valid, "apiVersion: v1", "apiVersion: v2", 1),
	} {
		if _, _, err := decoder.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("%s: accepted:\n%s", name, doc)
		}
	}
}

// TestOverlaysRender makes sure the kustomizations on disk are the ones
// rendered: a directory under overlays/ without a kustomization.yaml is a
// mistake, not something to skip quietly.
func TestOverlaysRender(t *testing.T) {
	entries, err := os.ReadDir("overlays")
	if err != nil {
		t.Fatal(err)
	}
	dirs := kustomizations(t)
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(dirs, filepath.Join("overlays", e.Name())) {
			t.Errorf("overlays/%s has no kustomization.yaml", e.Name())
		}
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			if o := render(t, dir); len(o.deployments) == 0 {
				t.Error("renders no Deployment")
			}
		})
	}
}
