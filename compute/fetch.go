package compute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// maxSourceBytes caps a fetched script or plugin, so that a wrong URL cannot
// fill memory.
const maxSourceBytes = 256 << 20

// fetchState is what the last fetch of a source saw, to tell a change.
type fetchState struct {
	have    bool
	hash    [32]byte
	modTime time.Time // files
	size    int64     // files
	etag    string    // http, s3
	lastMod string    // http
}

// fetched is one version of a source's content.
type fetched struct {
	data []byte // Lua code; nil for plugins
	path string // local file of a plugin
	hash [32]byte
}

// fetcher reads file, http(s) and s3 sources.
type fetcher struct {
	client    *http.Client
	baseDir   string
	pluginDir string
}

// localPath is src.Path made absolute against the config's directory.
func (f *fetcher) localPath(src Source) string {
	if filepath.IsAbs(src.Path) || f.baseDir == "" {
		return src.Path
	}
	return filepath.Join(f.baseDir, src.Path)
}

// fetch returns the source's content if it changed since prev (changed
// false and a zero fetched otherwise); s3 says where an s3:// source is read
// (nil: the environment's settings).
func (f *fetcher) fetch(ctx context.Context, src Source, s3 *S3Options, prev fetchState) (fetched, fetchState, bool, error) {
	switch src.Kind {
	case SourceS3:
		return f.fetchS3(ctx, src, s3, prev)
	case SourceFile:
		return f.fetchFile(src, prev)
	case SourceHTTP:
		return f.fetchHTTP(ctx, src, prev)
	}
	return fetched{}, prev, false, fmt.Errorf("source %s cannot be fetched", src)
}

func (f *fetcher) fetchFile(src Source, prev fetchState) (fetched, fetchState, bool, error) {
	path := f.localPath(src)
	fi, err := os.Stat(path)
	if err != nil {
		return fetched{}, prev, false, err
	}
	if fi.IsDir() {
		return fetched{}, prev, false, fmt.Errorf("%s is a directory", path)
	}
	// A plugin is large and can only be reloaded under a new path anyway:
	// read it only when its size or mtime moved. Scripts are small: hash
	// them every time, which also catches same-size edits within one mtime tick.
	if src.Plugin && prev.have && fi.ModTime().Equal(prev.modTime) && fi.Size() == prev.size {
		return fetched{}, prev, false, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fetched{}, prev, false, err
	}
	st := fetchState{have: true, hash: sha256.Sum256(data), modTime: fi.ModTime(), size: fi.Size()}
	if prev.have && st.hash == prev.hash {
		return fetched{}, st, false, nil
	}
	out := fetched{hash: st.hash}
	if src.Plugin {
		out.path, err = filepath.Abs(path)
	} else {
		out.data = data
	}
	return out, st, true, err
}

func (f *fetcher) fetchHTTP(ctx context.Context, src Source, prev fetchState) (fetched, fetchState, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return fetched{}, prev, false, err
	}
	if prev.have {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastMod != "" {
			req.Header.Set("If-Modified-Since", prev.lastMod)
		}
	}
	client := f.client
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fetched{}, prev, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified && prev.have {
		return fetched{}, prev, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return fetched{}, prev, false, fmt.Errorf("GET %s: %s", src.URL, resp.Status)
	}
	return f.readBody(src, prev, resp.Body, fetchState{etag: resp.Header.Get("ETag"), lastMod: resp.Header.Get("Last-Modified")})
}

// readBody reads a fetched source's body (bounded by maxSourceBytes) into
// its new state st (its validators set by the caller): changed is false
// when the content is the one prev has. A plugin is stored under its
// content hash.
func (f *fetcher) readBody(src Source, prev fetchState, body io.Reader, st fetchState) (out fetched, next fetchState, changed bool, err error) {
	data, err := io.ReadAll(io.LimitReader(body, maxSourceBytes+1))
	if err != nil {
		return fetched{}, prev, false, fmt.Errorf("GET %s: %w", src.URL, err)
	}
	if len(data) > maxSourceBytes {
		return fetched{}, prev, false, fmt.Errorf("GET %s: larger than %d bytes", src.URL, maxSourceBytes)
	}
	st.have, st.hash = true, sha256.Sum256(data)
	if prev.have && st.hash == prev.hash {
		return fetched{}, st, false, nil
	}
	out = fetched{hash: st.hash}
	if !src.Plugin {
		out.data = data
		return out, st, true, nil
	}
	out.path, err = f.storePlugin(data, st.hash)
	if err != nil {
		return fetched{}, prev, false, err
	}
	return out, st, true, nil
}

// storePlugin writes a downloaded plugin under its content hash and returns
// its path: every version gets its own path, which is what Go's plugin
// loader needs (it never loads one path twice).
func (f *fetcher) storePlugin(data []byte, hash [32]byte) (string, error) {
	dir := f.pluginDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "sluice-plugins")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("store plugin: %w", err)
	}
	path := filepath.Join(dir, hex.EncodeToString(hash[:])+".so")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, ".download-*")
	if err != nil {
		return "", fmt.Errorf("store plugin: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("store plugin %s: %w", path, errors.Join(werr, cerr))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("store plugin %s: %w", path, err)
	}
	return path, nil
}
