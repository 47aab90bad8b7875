package testkafka

import (
	"fmt"

	"github.com/sluicedb/sluice/internal/testcert"
)

// Secured is a broker's SASL_SSL listener, as managed Kafka services run
// it: TLS with a certificate of a test CA that names ServerName only (not
// 127.0.0.1: a client must set the server name to verify it), client
// certificates required, and SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
// OAUTHBEARER (the broker's unsecured token validator: an unsigned JWT
// with a sub claim passes).
type Secured struct {
	// Addr is the listener, 127.0.0.1:port.
	Addr string
	// ServerName is the one name the broker's certificate carries.
	ServerName string
	// CAFile signs the broker's and the client's certificates;
	// OtherCAFile is an unrelated CA that signed neither (a wrong CA).
	CAFile, OtherCAFile string
	// ClientCertFile and ClientKeyFile are a client certificate the
	// listener accepts.
	ClientCertFile, ClientKeyFile string
	// User and Password log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
	User, Password string
}

// The secured listener's name and user.
const (
	secureServerName = "broker.sluice.test"
	secureUser       = "sluice-user"
	securePassword   = "s3cret-Pa55word-for-tests"
)

// writeCerts makes the test CAs and the broker's and a client's
// certificates under dir and returns the listener's description (Addr
// unset) and the broker's key-and-chain file.
func writeCerts(dir string) (*Secured, string, error) {
	f, err := testcert.Write(dir, secureServerName)
	if err != nil {
		return nil, "", err
	}
	return &Secured{ServerName: f.ServerName, User: secureUser, Password: securePassword,
		CAFile: f.CAFile, OtherCAFile: f.OtherCAFile, ClientCertFile: f.ClientCertFile, ClientKeyFile: f.ClientKeyFile}, f.ServerKeyAndChainFile, nil
}

// secureProps are the server.properties lines of the SASL_SSL listener.
func secureProps(brokerPEM, caFile string) string {
	const jaas = "listener.name.sasl_ssl.%s.sasl.jaas.config=%s required%s;\n"
	return "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER\n" +
		fmt.Sprintf(jaas, "plain", "org.apache.kafka.common.security.plain.PlainLoginModule", fmt.Sprintf(` user_%s="%s"`, secureUser, securePassword)) +
		fmt.Sprintf(jaas, "scram-sha-256", "org.apache.kafka.common.security.scram.ScramLoginModule", "") +
		fmt.Sprintf(jaas, "scram-sha-512", "org.apache.kafka.common.security.scram.ScramLoginModule", "") +
		fmt.Sprintf(jaas, "oauthbearer", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", ` unsecuredLoginStringClaim_sub="broker"`) +
		"listener.name.sasl_ssl.ssl.client.auth=required\n" +
		"ssl.keystore.type=PEM\nssl.keystore.location=" + brokerPEM + "\n" +
		"ssl.truststore.type=PEM\nssl.truststore.location=" + caFile + "\n"
}

// scramArgs are StorageTool format's arguments that create the SCRAM user.
func scramArgs() []string {
	var args []string
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, secureUser, securePassword))
	}
	return args
}
