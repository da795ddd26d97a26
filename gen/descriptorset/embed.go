// Package descriptorset embeds the historyd.v1 descriptors with their
// comments, as `buf build` writes them (make gen), so server reflection can
// show clients the documented API. The Go code protoc-gen-go writes carries
// descriptors without comments.
package descriptorset

import _ "embed"

// FileDescriptorSet is the serialized google.protobuf.FileDescriptorSet of
// proto/, imports included, with source code info.
//
//go:embed historyd.binpb
var FileDescriptorSet []byte
