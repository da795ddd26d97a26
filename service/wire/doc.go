// Package wire is how historyd's responses and requests are encoded on the
// wire: the encoders that write a stored state entry as a
// historyd.v1.StateEntry (its value as a google.protobuf.Value, or as JSON
// text for value_json) straight from the bytes the store decoded, the
// TurnState that carries those encodings as they are, and the server's
// gRPC codec (Codec), which splices large entries into a response without
// copying them and decodes requests strictly, keeping what is wrong with
// their bytes (Request, Malformed) for the service to refuse.
//
// The mapping from LangGraph's values to the wire is documented on
// historyd.v1.StateEntry; appendProtoValue and appendJSONValue apply it.
package wire
