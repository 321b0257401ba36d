package io.scd.compat;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.sling.distribution.journal.messages.ClearCommand;
import org.apache.sling.distribution.journal.messages.DiscoveryMessage;
import org.apache.sling.distribution.journal.messages.LogMessage;
import org.apache.sling.distribution.journal.messages.PackageDistributedMessage;
import org.apache.sling.distribution.journal.messages.PackageMessage;
import org.apache.sling.distribution.journal.messages.PackageStatusMessage;
import org.apache.sling.distribution.journal.messages.PingMessage;
import org.apache.sling.distribution.journal.messages.SubscriberConfig;
import org.apache.sling.distribution.journal.messages.SubscriberState;

/**
 * Sling's side of scd's JSON wire compatibility test (tests/compat/test_sling_json.py).
 *
 * <p>{@code write}: one JSON line per sample message built with Sling's classes, {"messageType":
 * the class's simple name, "value": what a default Jackson ObjectMapper writes for it}, as
 * Sling's Kafka JSON sender puts them in a record and its messageType header.
 *
 * <p>{@code read}: for each line {"messageType", "value"} on standard input, the class the
 * header names read from the value with a default ObjectMapper (as Sling's JSON poller does:
 * unknown fields fail), written back with it: {"messageType", "value"}, {"error"} when Jackson
 * refused it, or {"skipped": true} for a messageType that names no Sling message.
 */
public final class SlingJson {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private static final Map<String, Class<?>> CLASSES = new LinkedHashMap<>();

    static {
        for (Class<?> cls : List.of(
                PackageMessage.class,
                PackageStatusMessage.class,
                DiscoveryMessage.class,
                ClearCommand.class,
                LogMessage.class,
                PingMessage.class,
                PackageDistributedMessage.class)) {
            CLASSES.put(cls.getSimpleName(), cls);
        }
    }

    private SlingJson() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (args.length == 1 && args[0].equals("write")) {
            for (Object message : samples()) {
                out.println(line(message.getClass().getSimpleName(), message));
            }
        } else if (args.length == 1 && args[0].equals("read")) {
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String text; (text = in.readLine()) != null; ) {
                out.println(read(text));
            }
        } else {
            System.err.println("usage: SlingJson write|read");
            System.exit(2);
        }
    }

    private static String line(String messageType, Object message) throws Exception {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("messageType", messageType);
        line.put("value", MAPPER.writerFor(message.getClass()).writeValueAsString(message));
        return MAPPER.writeValueAsString(line);
    }

    private static String read(String text) throws Exception {
        Map<?, ?> record = MAPPER.readValue(text, Map.class);
        String messageType = (String) record.get("messageType");
        Class<?> cls = CLASSES.get(messageType);
        if (cls == null) {
            return MAPPER.writeValueAsString(Map.of("skipped", true));
        }
        Object message;
        try {
            message = MAPPER.readerFor(cls).readValue((String) record.get("value"));
        } catch (Exception e) {
            return MAPPER.writeValueAsString(Map.of("error", String.valueOf(e.getMessage())));
        }
        return line(messageType, message);
    }

    private static List<Object> samples() {
        List<Object> samples = new ArrayList<>();

        PackageMessage inline = new PackageMessage();
        inline.setPubSlingId("pub-sling-1");
        inline.setReqType(PackageMessage.ReqType.ADD);
        inline.setPkgId("dstrpck-1-a,{b}");
        inline.setPkgType("journal_distribution");
        inline.setPkgLength(3);
        inline.setPkgBinary(new byte[] {0, 1, (byte) 0xff});
        inline.setPubAgentName("publish");
        inline.setUserId("admin");
        inline.setPaths(Arrays.asList("/content/a", "/content/b \u00e9"));
        inline.setDeepPaths(Arrays.asList("/content/a"));
        inline.setMetadata(new LinkedHashMap<>(Map.of("k", "v")));
        samples.add(inline);

        PackageMessage byReference = new PackageMessage();
        byReference.setPubSlingId("pub-sling-1");
        byReference.setReqType(PackageMessage.ReqType.DELETE);
        byReference.setPkgId("dstrpck-2");
        byReference.setPkgType("journal_distribution");
        byReference.setPkgLength(5_000_000_000L);
        byReference.setPkgBinaryRef("ref-2");
        byReference.setPubAgentName("publish");
        samples.add(byReference);

        for (PackageMessage.ReqType type :
                List.of(PackageMessage.ReqType.INVALIDATE, PackageMessage.ReqType.TEST)) {
            PackageMessage message = new PackageMessage();
            message.setPubSlingId("");
            message.setReqType(type);
            message.setPkgId("");
            message.setPkgType("");
            samples.add(message);
        }

        long offset = 0;
        for (PackageStatusMessage.Status status : PackageStatusMessage.Status.values()) {
            samples.add(new PackageStatusMessage("sub-sling", "subscriber-1", "publish", offset, status));
            offset = offset * 10 + 99;
        }

        DiscoveryMessage discovery = new DiscoveryMessage();
        discovery.setSubSlingId("sub-sling");
        discovery.setSubAgentName("subscriber-1");
        discovery.setSubscriberConfiguration(new SubscriberConfig(true, -1));
        discovery.setSubscriberStates(List.of(
                new SubscriberState("publish", 41, 2), new SubscriberState("other", -1, 0)));
        samples.add(discovery);
        DiscoveryMessage idle = new DiscoveryMessage();
        idle.setSubSlingId("sub-sling-2");
        idle.setSubAgentName("subscriber-2");
        idle.setSubscriberConfiguration(new SubscriberConfig(false, 0));
        idle.setSubscriberStates(List.of());
        samples.add(idle);

        samples.add(new ClearCommand("sub-sling", "subscriber-1", "publish", 12));
        samples.add(new LogMessage("publish", "sub-sling", "subscriber-1", "import failed", "at x\nat y"));
        samples.add(new LogMessage("publish", "sub-sling", "subscriber-1", "import failed", null));
        samples.add(new PingMessage());
        samples.add(new PackageDistributedMessage(
                "publish", "dstrpck-1", new String[] {"/content/a"}, new String[] {"/content/a", "/b"}, 7));
        return samples;
    }
}
