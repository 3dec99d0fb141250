package templates

import "context"

// assetsKey is the context key of the function that names static files.
type assetsKey struct{}

// WithAssetURL returns a context in which pages link to a static file
// by url(name): the server passes a function that adds the file's
// version, so that browsers may keep it for good.
func WithAssetURL(ctx context.Context, url func(name string) string) context.Context {
	return context.WithValue(ctx, assetsKey{}, url)
}

// assetURL is the address of the static file name in ctx, or its plain
// address under /static/.
func assetURL(ctx context.Context, name string) string {
	if url, ok := ctx.Value(assetsKey{}).(func(string) string); ok {
		return url(name)
	}
	return "/static/" + name
}
