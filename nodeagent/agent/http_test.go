package agent_test

import (
	"net/http"
	"time"
)

var httpClient = http.Client{Timeout: 5 * time.Second}
