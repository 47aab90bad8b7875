package grpclisten

import (
	"context"

	"google.golang.org/grpc"

	"github.com/sluicedb/sluice/ingest/talaria"
)

// Talaria's Ingress service (package talaria has its messages). Its
// descriptor and client are written here by hand, as protoc-gen-go-grpc
// would write them: the generator is a module of its own, and the
// one-method service is shorter than its template.

// ingressServer is what serves Talaria's Ingress service.
type ingressServer interface {
	Ingest(context.Context, *talaria.IngestRequest) (*talaria.IngestResponse, error)
}

// registerIngressServer serves srv's Ingest on s.
func registerIngressServer(s grpc.ServiceRegistrar, srv ingressServer) {
	s.RegisterService(&ingressServiceDesc, srv)
}

var ingressServiceDesc = grpc.ServiceDesc{
	ServiceName: "talaria.Ingress",
	HandlerType: (*ingressServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Ingest",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(talaria.IngestRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(ingressServer).Ingest(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: talaria.IngestMethod}
			handler := func(ctx context.Context, req any) (any, error) {
				return srv.(ingressServer).Ingest(ctx, req.(*talaria.IngestRequest))
			}
			return interceptor(ctx, in, info, handler)
		},
	}},
	Metadata: "talaria.proto",
}

// IngressClient calls a server's Ingress service: Talaria's client, and
// sluice's tests and benchmarks.
type IngressClient struct {
	cc grpc.ClientConnInterface
}

// NewIngressClient calls the Ingress service over cc.
func NewIngressClient(cc grpc.ClientConnInterface) *IngressClient {
	return &IngressClient{cc: cc}
}

// Ingest sends one request.
func (c *IngressClient) Ingest(ctx context.Context, in *talaria.IngestRequest, opts ...grpc.CallOption) (*talaria.IngestResponse, error) {
	out := new(talaria.IngestResponse)
	if err := c.cc.Invoke(ctx, talaria.IngestMethod, in, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}
