package coldtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Spark is Apache Spark 3.5 as a library (Maven Central jars with Iceberg's
// Spark runtime, iceberg-aws-bundle and the SQLite JDBC driver), resolved by
// scripts/install-spark; a test runs it as one local JVM.
type Spark struct {
	Java      string
	Classpath string
}

// FindSpark finds java, javac (the driver runs as a Java source file) and
// the classpath scripts/install-spark wrote.
func FindSpark() (*Spark, error) {
	cpFile := filepath.Join(cacheDir(), "spark", "classpath.txt")
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return nil, fmt.Errorf("Spark classpath %s: %w (run scripts/install-spark)", cpFile, ErrMissing)
	}
	for _, jar := range strings.Split(strings.TrimSpace(string(cp)), ":") {
		if _, err := os.Stat(jar); err != nil {
			return nil, fmt.Errorf("Spark jar %s: %w (run scripts/install-spark)", jar, ErrMissing)
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java: %w (run scripts/install-spark)", ErrMissing)
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return nil, fmt.Errorf("javac (a JDK, for the Spark test's driver): %w (run scripts/install-spark)", ErrMissing)
	}
	return &Spark{Java: java, Classpath: strings.TrimSpace(string(cp))}, nil
}

// sparkJavaOptions are what spark-submit's launcher adds on Java 17
// (Spark's JavaModuleOptions): Spark reaches into JDK internals.
var sparkJavaOptions = []string{
	"-XX:+IgnoreUnrecognizedVMOptions",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
	"--add-opens=java.base/sun.security.action=ALL-UNNAMED",
	"--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
	"-Djdk.reflect.useDirectMethodHandle=false",
	"-Dio.netty.tryReflectionSetAccessible=true",
}

// Run starts one JVM that runs the Java source file driver with args and
// returns its standard output; on failure the error carries the end of
// its standard error (Spark's log). The process inherits the environment
// (the S3 credentials StartS3 exported).
func (s *Spark) Run(ctx context.Context, driver string, args ...string) ([]byte, error) {
	cmdArgs := append([]string{"-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}, sparkJavaOptions...)
	cmdArgs = append(cmdArgs, "-cp", s.Classpath, driver)
	cmd := exec.CommandContext(ctx, s.Java, append(cmdArgs, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		log := stderr.Bytes()
		return stdout.Bytes(), fmt.Errorf("spark: %w: %s", err, log[max(0, len(log)-6000):])
	}
	return stdout.Bytes(), nil
}
