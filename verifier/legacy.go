package verifier

import (
	"sync"

	"github.com/oecp/oecp/graph"
)

// The canonical payload types of the reserved legacy facade, LegacyShipRequest
// and LegacyShipResult, as PayloadTypes.
const artifactItemType = `{"kind":"record","fields":{"artifactId":{"type":{"kind":"string"},"required":true},"byteLength":{"type":{"kind":"integer"},"required":true},"lineage":{"type":{"kind":"record","fields":{"attempt":{"type":{"kind":"integer"},"required":true},"generation":{"type":{"kind":"integer"},"required":true},"runId":{"type":{"kind":"string"},"required":true}}},"required":true},"mediaType":{"type":{"kind":"string"},"required":true},"producer":{"type":{"kind":"record","fields":{"node":{"type":{"kind":"string"},"required":true},"worker":{"type":{"kind":"string"},"required":true}}},"required":true},"redaction":{"type":{"kind":"enum","values":["confidential","internal","public","restricted"]},"required":true},"sha256":{"type":{"kind":"string"},"required":true},"typeId":{"type":{"kind":"string"},"required":true}}}`

const legacyRequestType = `{"kind":"record","fields":{"artifacts":{"type":{"kind":"array","items":` + artifactItemType + `},"required":true},"isolationProfile":{"type":{"kind":"string"},"required":true},"issue":{"type":{"kind":"string"},"required":false},"modelLevel":{"type":{"kind":"enum","values":["level1","level2","level3"]},"required":true},"prompt":{"type":{"kind":"string"},"required":false},"provider":{"type":{"kind":"string"},"required":true},"providerProfile":{"type":{"kind":"string"},"required":true},"repository":{"type":{"kind":"string"},"required":true},"source":{"type":{"kind":"enum","values":["artifact","issue","prompt"]},"required":true}}}`

const legacyResultType = `{"kind":"record","fields":{"artifacts":{"type":{"kind":"array","items":` + artifactItemType + `},"required":true},"branch":{"type":{"kind":"string"},"required":false},"headRevision":{"type":{"kind":"string"},"required":false},"pullRequestUrl":{"type":{"kind":"string"},"required":false},"repository":{"type":{"kind":"string"},"required":false},"status":{"type":{"kind":"enum","values":["failed","succeeded"]},"required":true},"summary":{"type":{"kind":"string"},"required":true}}}`

var legacyOnce = sync.OnceValues(func() (graph.PayloadType, graph.PayloadType) {
	req, err := graph.DecodePayloadType([]byte(legacyRequestType))
	if err != nil {
		panic("verifier: bad legacy request type: " + err.Error())
	}
	res, err := graph.DecodePayloadType([]byte(legacyResultType))
	if err != nil {
		panic("verifier: bad legacy result type: " + err.Error())
	}
	return req, res
})

// legacyTypes returns the canonical LegacyShipRequest and LegacyShipResult
// payload types.
func legacyTypes() (graph.PayloadType, graph.PayloadType) { return legacyOnce() }
