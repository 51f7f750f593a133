package memkit.neo4j;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.ConnectorPortRegister;
import org.neo4j.configuration.connectors.ConnectorType;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.internal.helpers.HostnamePort;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * An embedded Neo4j DBMS with Bolt on 127.0.0.1, for tests, benchmarks and notebooks.
 *
 * <p>Usage: {@code java -jar memkit-neo4j.jar --data DIR [--port N]} (port 0 or none: a free one).
 * Authentication is off and the listener is loopback only, so nothing outside this machine reaches it.
 * Prints one line {@code memkit-neo4j ready version=V edition=E bolt=bolt://127.0.0.1:PORT startup_ms=T} when Bolt
 * accepts connections, and shuts down cleanly when its standard input closes or on SIGTERM
 * (the database survives a SIGKILL too: the next start on the same folder recovers from its log).
 */
public final class Launcher {
    private Launcher() {}

    public static void main(String[] args) throws Exception {
        Path data = null;
        int port = 0;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--data" -> data = Path.of(args[++i]);
                case "--port" -> port = Integer.parseInt(args[++i]);
                default -> {
                    System.err.println("usage: memkit-neo4j --data DIR [--port N]; unknown argument " + args[i]);
                    System.exit(2);
                }
            }
        }
        if (data == null) {
            System.err.println("usage: memkit-neo4j --data DIR [--port N]");
            System.exit(2);
        }
        Files.createDirectories(data);

        long started = System.nanoTime();
        // Settings by their configuration names, so one source builds against 5.26 and 2026.x.
        // A test server: loopback Bolt, no auth, a small page cache, no preallocated files, no
        // usage reports, and short waits on shutdown (nothing is connected by then).
        Path conf = data.resolve("memkit-neo4j.conf");
        Files.writeString(conf, String.join("\n",
                "server.bolt.enabled=true",
                "server.bolt.listen_address=127.0.0.1:" + port,
                "server.bolt.advertised_address=127.0.0.1:" + port,
                "server.http.enabled=false",
                "dbms.security.auth_enabled=false",
                "server.memory.pagecache.size=128m",
                "db.tx_log.preallocate=false",
                "db.store.files.preallocate=false",
                "dbms.usage_report.enabled=false",
                "internal.server.bolt.connection_shutdown_wait_time=1s",
                "internal.server.bolt.thread_pool_shutdown_wait_time=1s",
                "server.config.strict_validation.enabled=false",
                ""));
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(data).loadPropertiesFromFile(conf).build();

        AtomicBoolean stopped = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(1);
        Runnable stop = () -> {
            if (stopped.compareAndSet(false, true)) {
                System.out.println("memkit-neo4j stopping");
                System.out.flush();
                dbms.shutdown();
                done.countDown();
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.run();
            try {
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "memkit-neo4j-shutdown"));

        GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
        String version = db.executeTransactionally(
                // 2025+ also lists the Cypher versions it speaks as a component.
                "CALL dbms.components() YIELD name, versions, edition WHERE name = 'Neo4j Kernel'"
                        + " RETURN 'version=' + versions[0] + ' edition=' + edition AS v",
                Map.of(), result -> (String) result.next().get("v"));
        HostnamePort bolt = ((GraphDatabaseAPI) db).getDependencyResolver()
                .resolveDependency(ConnectorPortRegister.class)
                .getLocalAddress(ConnectorType.BOLT);
        long millis = (System.nanoTime() - started) / 1_000_000;
        System.out.println("memkit-neo4j ready " + version + " bolt=bolt://127.0.0.1:" + bolt.getPort()
                + " startup_ms=" + millis);
        System.out.flush();

        // Standard input closing (the parent went away or closed the pipe) stops the server.
        Thread watcher = new Thread(() -> {
            try (InputStream in = System.in) {
                byte[] buffer = new byte[256];
                while (in.read(buffer) >= 0) {
                    // ignore anything written to us
                }
            } catch (IOException ignored) {
                // a broken pipe means the same as end of input
            }
            stop.run();
        }, "memkit-neo4j-stdin");
        watcher.setDaemon(true);
        watcher.start();
        done.await();
        System.out.println("memkit-neo4j stopped");
        System.out.flush();
        System.exit(0);
    }
}
