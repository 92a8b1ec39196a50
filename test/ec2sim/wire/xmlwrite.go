package wire

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"

	"github.com/enipam/enipam/test/ec2sim/state"
)

// ec2Namespace is the XML namespace of EC2 API version 2016-11-15, the only
// version EC2 clients speak.
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// writeResult writes a successful answer:
// <ActionResponse xmlns=...><requestId>..</requestId>body fields</ActionResponse>.
func writeResult(w http.ResponseWriter, action, requestID string, body any) error {
	fields, err := bodyFields(body)
	if err != nil {
		return err
	}

	var out bytes.Buffer
	out.Grow(len(fields) + 256)
	out.WriteString(xml.Header)
	out.WriteString("<" + action + "Response xmlns=\"" + ec2Namespace + "\">\n")
	out.WriteString("    <requestId>" + requestID + "</requestId>\n")
	out.Write(fields)
	out.WriteString("\n</" + action + "Response>\n")
	writeXMLHeaders(w, requestID, out.Len())
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(out.Bytes())
	return err
}

// bodyFields renders the fields of an answer, the elements that go inside
// <ActionResponse>.
func bodyFields(body any) ([]byte, error) {
	if b, ok := fastFields(body); ok {
		return b, nil
	}
	var inner bytes.Buffer
	enc := xml.NewEncoder(&inner)
	if err := enc.EncodeElement(body, xml.StartElement{Name: xml.Name{Local: "x"}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	fields := inner.Bytes()
	return fields[len("<x>") : len(fields)-len("</x>")], nil
}

// xmlError is EC2's error document.
type xmlError struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

// writeError writes e as EC2 does, with e's HTTP status.
func writeError(w http.ResponseWriter, requestID string, e *state.APIError) {
	b, err := xml.Marshal(xmlError{Code: e.Code, Message: e.Message, RequestID: requestID})
	if err != nil {
		// Strings always marshal.
		panic(err)
	}
	body := append([]byte(xml.Header), b...)
	writeXMLHeaders(w, requestID, len(body))
	status := e.HTTPStatus
	if status == 0 {
		status = state.StatusForCode(e.Code)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeXMLHeaders(w http.ResponseWriter, requestID string, n int) {
	h := w.Header()
	h.Set("Content-Type", "text/xml;charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(n))
	h.Set("X-Amzn-Requestid", requestID)
	h.Set("Server", "AmazonEC2")
}
