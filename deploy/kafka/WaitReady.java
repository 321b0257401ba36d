import java.util.Collection;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.Node;

/**
 * Readiness probe for deploy/kafka.sh: returns 0 once the broker at args[0] answers a
 * DescribeCluster (it is registered and unfenced) and a Metadata request (ListTopics), or 1
 * when args[1] seconds pass first. Uses the broker's own kafka-clients jar, so nothing beyond
 * what runs the broker is needed.
 */
public final class WaitReady {
    // One attempt must fit well inside the overall deadline; 2 s is ample on localhost.
    private static final int REQUEST_TIMEOUT_MS = 2_000;
    // Short pause between attempts: a KRaft single node usually becomes ready within seconds.
    private static final long RETRY_PAUSE_MS = 250;

    private WaitReady() {
    }

    public static void main(String[] args) throws InterruptedException {
        String bootstrap = args[0];
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[1]));
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        // Reconnect quickly while the broker is still binding its listener.
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, 100);
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        String lastError = "no answer yet";
        try (Admin admin = Admin.create(props)) {
            while (System.nanoTime() < deadline) {
                try {
                    DescribeClusterResult cluster = admin.describeCluster();
                    Collection<Node> nodes = cluster.nodes().get(REQUEST_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    Node controller = cluster.controller().get(REQUEST_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    Set<String> topics = admin.listTopics().names()
                            .get(REQUEST_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    if (!nodes.isEmpty() && controller != null && !controller.isEmpty()) {
                        System.out.println("ready: " + nodes.size() + " broker(s), "
                                + topics.size() + " topic(s)");
                        return;
                    }
                    lastError = "cluster has no registered broker yet";
                } catch (Exception e) {
                    lastError = e.toString();
                }
                Thread.sleep(RETRY_PAUSE_MS);
            }
        }
        System.err.println("not ready at " + bootstrap + ": " + lastError);
        System.exit(1);
    }
}
