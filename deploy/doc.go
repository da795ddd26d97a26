// Package deploy holds historyd's Kubernetes manifests (base/ and
// overlays/, for kustomize) and, in its tests, what keeps them honest:
// every overlay is rendered with kustomize's own library, every object is
// decoded strictly into the Kubernetes API types, the invariants a working
// deployment depends on are checked, and every flag and HISTORYD_*
// variable the manifests set must be one `historyd serve --help` lists.
//
// It is a module of its own so that the Kubernetes dependencies stay out of
// historyd's. See docs/deploy.md.
package deploy
