package service

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	v1alphareflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/historyd/historyd/gen/descriptorset"
)

// documented resolves historyd's own files from the embedded descriptor set,
// which keeps the proto comments, so `grpcurl describe` shows the API's
// documentation; everything else (health, reflection) comes from the
// descriptors linked into the binary.
type documented struct {
	files *protoregistry.Files
}

func (d documented) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if fd, err := d.files.FindFileByPath(path); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

func (d documented) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if desc, err := d.files.FindDescriptorByName(name); err == nil {
		return desc, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}

// loadDocumented parses the embedded descriptor set. It is generated and
// checked in sync with proto/, so a failure is a build defect.
func loadDocumented() (documented, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(descriptorset.FileDescriptorSet, &set); err != nil {
		return documented{}, fmt.Errorf("embedded descriptor set: %w", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return documented{}, fmt.Errorf("embedded descriptor set: %w", err)
	}
	return documented{files: files}, nil
}

// registerReflection registers both reflection versions (grpcurl and
// grpc_cli still ask v1alpha), answering from the documented descriptors
// when they load and from the linked ones otherwise.
func registerReflection(gs *grpc.Server) {
	opts := reflection.ServerOptions{Services: gs}
	if d, err := loadDocumented(); err == nil {
		opts.DescriptorResolver = d
	}
	v1reflectiongrpc.RegisterServerReflectionServer(gs, reflection.NewServerV1(opts))
	v1alphareflectiongrpc.RegisterServerReflectionServer(gs, reflection.NewServer(opts))
}
