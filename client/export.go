package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxExportErrorBody bounds the error body of a refused export read.
const maxExportErrorBody = 64 << 10

// ExportError is a refused run export: the HTTP status and the protocol
// error code and message of its JSON body (NOT_FOUND, GONE,
// SCHEMA_VIOLATION, UNAUTHORIZED, STORE_UNAVAILABLE, …).
type ExportError struct {
	Status  int
	Code    string
	Message string
}

func (e *ExportError) Error() string {
	return fmt.Sprintf("export refused: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// ExportURL is the HTTP(S) address of a run's export on the server whose
// WebSocket URL is rawURL (checked as Dial checks it): ws becomes http,
// wss https, and the path's /oecp becomes /oecp/runs/RUN/export.
func ExportURL(rawURL string, allowPlaintext bool, runID, format string) (*url.URL, error) {
	u, err := CheckURL(rawURL, allowPlaintext)
	if err != nil {
		return nil, err
	}
	out := *u
	out.Scheme = strings.Replace(u.Scheme, "ws", "http", 1)
	base := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/oecp")
	out.Path = base + "/oecp/runs/" + runID + "/export"
	out.RawPath = base + "/oecp/runs/" + url.PathEscape(runID) + "/export"
	out.RawQuery = url.Values{"format": {format}}.Encode()
	return &out, nil
}

// Export streams run runID's export in format ("trace" or "semantic")
// from the server at rawURL to w, with opts' token and trust roots. A
// refusal is an *ExportError. It never follows a redirect.
func Export(ctx context.Context, rawURL string, opts DialOptions, runID, format string, w io.Writer) error {
	u, err := ExportURL(rawURL, opts.AllowPlaintext, runID, format)
	if err != nil {
		return err
	}
	if strings.ContainsAny(opts.Token, "\r\n") {
		return errors.New("the bearer token contains a line break")
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if u.Scheme == "https" {
		if tr.TLSClientConfig, err = TLSConfig(opts.RootCAs, opts.CAFiles); err != nil {
			return err
		}
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+opts.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return exportError(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("export: the stream was cut off: %w", err)
	}
	return nil
}

func exportError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxExportErrorBody))
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return &ExportError{Status: resp.StatusCode, Code: "HTTP_" + fmt.Sprint(resp.StatusCode), Message: strings.TrimSpace(string(body))}
	}
	return &ExportError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
}
