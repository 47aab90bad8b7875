package compute

import "errors"

// luaOptions will hold the Lua runtime once the luavm package is merged.
type luaOptions struct{}

func (p *Processor) newLua(f *function, code string) (Handler, error) {
	return nil, errors.New("lua: runtime not merged yet")
}
