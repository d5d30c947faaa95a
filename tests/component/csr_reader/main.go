// Command csr_reader reads certificate signing request texts the way Kubernetes does, so that the
// approver's own reading can be compared with it.
//
// For each JSON line {"id": N, "request": "<base64 of the PEM text>"} on stdin it writes one JSON
// line on stdout with what Go reads: encoding/pem.Decode (the first block Go accepts, as the
// kube-apiserver's CSR validation and kube-controller-manager's signer both do), the block type,
// x509.ParseCertificateRequest and CheckSignature, the subject's CN, Organizations and attribute
// OIDs, the subject alternative names and the OIDs of the extensions Go found in the request (Go
// merges every extensionRequest attribute), and then what a certificate would carry: a certificate
// is created with a throwaway CA from the template kube-controller-manager's signer builds (the
// request's parsed subject, its DNS names, IP addresses, e-mail addresses and URIs, and its
// extensions), parsed back, and its CN (the user), Organizations (the groups) and subject
// alternative names reported.  Only the standard library is used.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"time"
)

// names are the subject alternative names of a request or a certificate, as Go parsed them.
type names struct {
	DNS   []string `json:"dns"`
	IP    []string `json:"ip"`
	URI   []string `json:"uri"`
	Email []string `json:"email"`
}

func sansOf(dns []string, ips []net.IP, uris []*url.URL, emails []string) names {
	out := names{DNS: []string{}, IP: []string{}, URI: []string{}, Email: []string{}}
	out.DNS = append(out.DNS, dns...)
	for _, ip := range ips {
		out.IP = append(out.IP, ip.String())
	}
	for _, u := range uris {
		out.URI = append(out.URI, u.String())
	}
	out.Email = append(out.Email, emails...)
	return out
}

type input struct {
	ID      int    `json:"id"`
	Request []byte `json:"request"`
}

type reading struct {
	ID            int      `json:"id"`
	Error         string   `json:"error,omitempty"`
	BlockType     string   `json:"blockType,omitempty"`
	CommonName    string   `json:"commonName"`
	Organizations []string `json:"organizations"`
	Attributes    []string `json:"attributes"`
	SANs          names    `json:"sans"`
	Extensions    []string `json:"extensions"`
	User          string   `json:"user"`
	Groups        []string `json:"groups"`
	CertSANs      names    `json:"certSans"`
}

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "csr_reader test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// sign issues a client certificate for the request the way kube-controller-manager's signer
// builds its template (pkg/controller/certificates/authority: the request's parsed subject, SANs
// and extensions), and returns the certificate as parsed back.
func (a *authority) sign(cr *x509.CertificateRequest) (*x509.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber:    big.NewInt(2),
		Subject:         cr.Subject,
		DNSNames:        cr.DNSNames,
		IPAddresses:     cr.IPAddresses,
		EmailAddresses:  cr.EmailAddresses,
		URIs:            cr.URIs,
		Extensions:      cr.Extensions,
		ExtraExtensions: cr.ExtraExtensions,
		NotBefore:       time.Now().Add(-time.Minute),
		NotAfter:        time.Now().Add(time.Hour),
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, cr.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func read(a *authority, in input) reading {
	out := reading{
		ID: in.ID, Organizations: []string{}, Attributes: []string{}, Groups: []string{},
		SANs: sansOf(nil, nil, nil, nil), Extensions: []string{}, CertSANs: sansOf(nil, nil, nil, nil),
	}
	block, _ := pem.Decode(in.Request)
	if block == nil {
		out.Error = "no PEM block"
		return out
	}
	out.BlockType = block.Type
	if block.Type != "CERTIFICATE REQUEST" {
		out.Error = "PEM block type must be CERTIFICATE REQUEST"
		return out
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		out.Error = "parse: " + err.Error()
		return out
	}
	if err := cr.CheckSignature(); err != nil {
		out.Error = "signature: " + err.Error()
		return out
	}
	out.CommonName = cr.Subject.CommonName
	out.Organizations = append(out.Organizations, cr.Subject.Organization...)
	for _, name := range cr.Subject.Names {
		out.Attributes = append(out.Attributes, name.Type.String())
	}
	out.SANs = sansOf(cr.DNSNames, cr.IPAddresses, cr.URIs, cr.EmailAddresses)
	for _, ext := range cr.Extensions {
		out.Extensions = append(out.Extensions, ext.Id.String())
	}
	cert, err := a.sign(cr)
	if err != nil {
		out.Error = "sign: " + err.Error()
		return out
	}
	out.User = cert.Subject.CommonName
	out.Groups = append(out.Groups, cert.Subject.Organization...)
	out.CertSANs = sansOf(cert.DNSNames, cert.IPAddresses, cert.URIs, cert.EmailAddresses)
	return out
}

func main() {
	a, err := newAuthority()
	if err != nil {
		fmt.Fprintln(os.Stderr, "csr_reader:", err)
		os.Exit(1)
	}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	encoder := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		var in input
		if err := json.Unmarshal(scanner.Bytes(), &in); err != nil {
			fmt.Fprintln(os.Stderr, "csr_reader: bad input line:", err)
			os.Exit(2)
		}
		if err := encoder.Encode(read(a, in)); err != nil {
			fmt.Fprintln(os.Stderr, "csr_reader:", err)
			os.Exit(1)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "csr_reader:", err)
		os.Exit(1)
	}
}
