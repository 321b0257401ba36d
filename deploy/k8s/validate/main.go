// Command validate checks scd's Kubernetes manifests offline, without a cluster:
//
//	validate DIR
//
// It renders DIR as `kubectl apply -k DIR` would (its kustomization.yaml lists the manifests;
// no patches, so rendering is reading them in order; a manifest of DIR that the list leaves
// out is an error), decodes every object strictly into the typed structs of k8s.io/api (an
// unknown or duplicate field, a wrong type or an unregistered kind is an error), then checks
// what the schema cannot: selectors that select the pods they are meant for, probes and
// Service ports naming container ports, resources on every container, referenced ConfigMaps
// defined, a StatefulSet's headless Service. It prints a JSON summary and exits 1 when any
// problem was found.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's file scd uses: anything else is refused.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
}

// workload is a pod template with its owner's name, for the cross-object checks.
type workload struct {
	name     string
	replicas int32
	template corev1.PodTemplateSpec
}

type checker struct {
	problems   []string
	workloads  []workload
	services   map[string]*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	pdbs       []*policyv1.PodDisruptionBudget
	sets       []*appsv1.StatefulSet
	kinds      map[string]int
	pending    []reference // ConfigMap references, checked once all objects are read
}

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// envReference is a $(NAME) reference in an env value, which Kubernetes expands only for
// variables defined before it.
var envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: validate DIR")
		os.Exit(2)
	}
	c := &checker{
		problems:   []string{},
		services:   map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{},
		kinds:      map[string]int{},
	}
	c.run(os.Args[1])
	summary, _ := json.Marshal(map[string]any{"objects": c.kinds, "problems": c.problems})
	fmt.Println(string(summary))
	if len(c.problems) > 0 {
		os.Exit(1)
	}
}

func (c *checker) run(dir string) {
	resources := c.resources(dir)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, name := range resources {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			c.fail("%s: %v", name, err)
			continue
		}
		for i, document := range documentSeparator.Split(string(data), -1) {
			if strings.TrimSpace(stripComments(document)) == "" {
				continue
			}
			object, kind, err := decoder.Decode([]byte(document), nil, nil)
			if err != nil {
				c.fail("%s, document %d: %v", name, i+1, err)
				continue
			}
			c.kinds[kind.Kind]++
			c.collect(name, object)
		}
	}
	c.crossCheck()
}

// resources reads the kustomization and checks that it lists every manifest of dir, once.
func (c *checker) resources(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		c.fail("kustomization.yaml: %v", err)
		return nil
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		c.fail("kustomization.yaml: %v", err)
		return nil
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		c.fail("kustomization.yaml: not a kustomize.config.k8s.io/v1beta1 Kustomization")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	onDisk := map[string]bool{}
	for _, file := range files {
		if base := filepath.Base(file); base != "kustomization.yaml" {
			onDisk[base] = true
		}
	}
	listed := map[string]bool{}
	for _, name := range k.Resources {
		if listed[name] {
			c.fail("kustomization.yaml lists %s twice", name)
		}
		listed[name] = true
		if !onDisk[name] {
			c.fail("kustomization.yaml lists %s, which is not a manifest of the directory", name)
		}
	}
	var missing []string
	for name := range onDisk {
		if !listed[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		c.fail("%s is not in kustomization.yaml's resources: it would not be applied", name)
	}
	return k.Resources
}

func stripComments(document string) string {
	var kept []string
	for _, line := range strings.Split(document, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

func (c *checker) collect(file string, object runtime.Object) {
	switch o := object.(type) {
	case *appsv1.Deployment:
		c.workload(file, "Deployment/"+o.Name, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template)
	case *appsv1.StatefulSet:
		c.workload(file, "StatefulSet/"+o.Name, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template)
		c.sets = append(c.sets, o)
	case *corev1.Service:
		c.services[o.Name] = o
	case *corev1.ConfigMap:
		c.configMaps[o.Name] = o
	case *policyv1.PodDisruptionBudget:
		c.pdbs = append(c.pdbs, o)
	case *corev1.Namespace:
	default:
		c.fail("%s: %T is not a kind these manifests are checked for", file, object)
	}
}

func (c *checker) workload(
	file, name string, replicas *int32, selector *metav1.LabelSelector, template corev1.PodTemplateSpec,
) {
	where := file + ": " + name
	if replicas == nil {
		c.fail("%s: replicas unset (1 by default): say how many", where)
		replicas = new(int32)
	}
	if !selects(selector, template.Labels) {
		c.fail("%s: its selector does not select its own pod template's labels", where)
	}
	for _, container := range template.Spec.Containers {
		c.container(where+", container "+container.Name, container)
	}
	c.workloads = append(c.workloads, workload{name, *replicas, template})
}

func (c *checker) container(where string, container corev1.Container) {
	requests, limits := container.Resources.Requests, container.Resources.Limits
	for _, resource := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := requests[resource]; !ok {
			c.fail("%s: no %s request", where, resource)
		}
	}
	memory, limited := limits[corev1.ResourceMemory]
	if !limited {
		c.fail("%s: no memory limit", where)
	} else if request, ok := requests[corev1.ResourceMemory]; ok && memory.Cmp(request) < 0 {
		c.fail("%s: memory limit below its request", where)
	}
	ports := map[string]bool{}
	for _, port := range container.Ports {
		ports[port.Name] = true
	}
	probes := map[string]*corev1.Probe{
		"readiness": container.ReadinessProbe, "liveness": container.LivenessProbe,
		"startup": container.StartupProbe,
	}
	for kind, probe := range probes {
		if probe == nil {
			if kind != "startup" {
				c.fail("%s: no %s probe", where, kind)
			}
			continue
		}
		if probe.HTTPGet != nil && !portNamed(probe.HTTPGet.Port, ports) {
			c.fail("%s: %s probe port %s is no container port's name", where, kind, probe.HTTPGet.Port.String())
		}
	}
	defined := map[string]bool{}
	for _, variable := range container.Env {
		for _, match := range envReference.FindAllStringSubmatch(variable.Value, -1) {
			if !defined[match[1]] {
				c.fail("%s: env %s refers to $(%s), not defined before it", where, variable.Name, match[1])
			}
		}
		defined[variable.Name] = true
		if from := variable.ValueFrom; from != nil && from.ConfigMapKeyRef != nil {
			c.configMapKey(where, from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key)
		}
	}
	for _, source := range container.EnvFrom {
		if source.ConfigMapRef != nil {
			c.configMapKey(where, source.ConfigMapRef.Name, "")
		}
	}
}

// configMapKey records a reference, checked once every object is read.
func (c *checker) configMapKey(where, name, key string) {
	c.pending = append(c.pending, reference{where, name, key})
}

type reference struct{ where, name, key string }

func portNamed(port intstr.IntOrString, names map[string]bool) bool {
	return port.Type == intstr.Int || names[port.StrVal]
}

func selects(selector *metav1.LabelSelector, podLabels map[string]string) bool {
	if selector == nil {
		return false
	}
	compiled, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil || compiled.Empty() {
		return false
	}
	return compiled.Matches(labels.Set(podLabels))
}

// selected is the workloads whose pods match: by a Service's selector or a PDB's.
func (c *checker) selected(match func(map[string]string) bool) []workload {
	var found []workload
	for _, w := range c.workloads {
		if match(w.template.Labels) {
			found = append(found, w)
		}
	}
	return found
}

func (c *checker) crossCheck() {
	for _, ref := range c.pending {
		configMap, ok := c.configMaps[ref.name]
		if !ok {
			c.fail("%s: ConfigMap %s is not defined here", ref.where, ref.name)
		} else if _, has := configMap.Data[ref.key]; ref.key != "" && !has {
			c.fail("%s: ConfigMap %s has no key %s", ref.where, ref.name, ref.key)
		}
	}
	for _, w := range c.workloads {
		for _, volume := range w.template.Spec.Volumes {
			if volume.ConfigMap != nil && c.configMaps[volume.ConfigMap.Name] == nil {
				c.fail("%s: volume %s: ConfigMap %s is not defined here", w.name, volume.Name, volume.ConfigMap.Name)
			}
		}
	}
	for name, service := range c.services {
		podLabels := labels.SelectorFromSet(service.Spec.Selector)
		pods := c.selected(func(l map[string]string) bool {
			return len(service.Spec.Selector) > 0 && podLabels.Matches(labels.Set(l))
		})
		if len(pods) == 0 {
			c.fail("Service/%s selects no workload's pods", name)
		}
		for _, port := range service.Spec.Ports {
			for _, w := range pods {
				if !podHasPort(w.template.Spec, port.TargetPort) {
					c.fail("Service/%s: target port %s is no port of %s", name, port.TargetPort.String(), w.name)
				}
			}
		}
	}
	for _, set := range c.sets {
		service := c.services[set.Spec.ServiceName]
		if service == nil || service.Spec.ClusterIP != corev1.ClusterIPNone {
			c.fail("StatefulSet/%s: its serviceName %q names no headless Service", set.Name, set.Spec.ServiceName)
		}
	}
	for _, pdb := range c.pdbs {
		pods := c.selected(func(l map[string]string) bool { return selects(pdb.Spec.Selector, l) })
		if len(pods) != 1 {
			c.fail("PodDisruptionBudget/%s selects %d workloads' pods, not one", pdb.Name, len(pods))
			continue
		}
		if least := pdb.Spec.MinAvailable; least != nil && least.Type == intstr.Int && least.IntVal >= pods[0].replicas {
			c.fail("PodDisruptionBudget/%s: minAvailable %d of %d replicas blocks every drain", pdb.Name, least.IntVal, pods[0].replicas)
		}
	}
	for _, w := range c.workloads {
		covered := false
		for _, pdb := range c.pdbs {
			covered = covered || selects(pdb.Spec.Selector, w.template.Labels)
		}
		if !covered {
			c.fail("%s has no PodDisruptionBudget", w.name)
		}
	}
}

func podHasPort(spec corev1.PodSpec, port intstr.IntOrString) bool {
	for _, container := range spec.Containers {
		for _, p := range container.Ports {
			if (port.Type == intstr.String && p.Name == port.StrVal) ||
				(port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}
