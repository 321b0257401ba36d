package io.scd.compat;

import java.io.ByteArrayInputStream;
import java.io.File;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import javax.jcr.Binary;
import javax.jcr.Node;
import javax.jcr.Repository;
import javax.jcr.Session;
import javax.jcr.SimpleCredentials;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.jackrabbit.api.ReferenceBinary;
import org.apache.jackrabbit.oak.jcr.Jcr;
import org.apache.jackrabbit.oak.plugins.blob.datastore.DataStoreBlobStore;
import org.apache.jackrabbit.oak.plugins.blob.datastore.OakFileDataStore;
import org.apache.jackrabbit.oak.segment.SegmentNodeStoreBuilders;
import org.apache.jackrabbit.oak.segment.file.FileStore;
import org.apache.jackrabbit.oak.segment.file.FileStoreBuilder;

/**
 * A real Oak repository (Oak's JCR on a segment store whose binaries go to an OakFileDataStore,
 * as an author's repository is set up) stores nt:file nodes and prints, as JSON, the reference
 * each binary hands out through JCR: {@code OakRepositoryCompat <dir> <size> [<size> ...]}.
 * {@link ReferenceBinary#getReference()} is what FileVault's exporter writes as {BinaryRef} in
 * a binary-less package; it is null for a binary Oak inlines. The data store is
 * {@code <dir>/datastore}, the segment store {@code <dir>/segmentstore}. Each binary is
 * {@code size} pseudo-random bytes (seeded by its size), at {@code /content/f<size>.bin}.
 */
public final class OakRepositoryCompat {
    private OakRepositoryCompat() {}

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        OakFileDataStore fds = new OakFileDataStore();
        fds.setPath(new File(dir, "datastore").getAbsolutePath());
        fds.init(null);
        FileStore fileStore = FileStoreBuilder.fileStoreBuilder(new File(dir, "segmentstore"))
                .withBlobStore(new DataStoreBlobStore(fds)).build();
        Repository repository =
                new Jcr(SegmentNodeStoreBuilders.builder(fileStore).build()).createRepository();
        Session session = repository.login(new SimpleCredentials("admin", "admin".toCharArray()));
        Node folder = session.getRootNode().addNode("content", "nt:folder");
        List<Map<String, Object>> written = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            int size = Integer.parseInt(args[i]);
            byte[] data = new byte[size];
            new Random(size).nextBytes(data);
            Node content = folder.addNode("f" + size + ".bin", "nt:file")
                    .addNode("jcr:content", "nt:resource");
            content.setProperty("jcr:mimeType", "application/octet-stream");
            content.setProperty("jcr:data",
                    session.getValueFactory().createBinary(new ByteArrayInputStream(data)));
            session.save();
            Binary binary = content.getProperty("jcr:data").getBinary();
            Map<String, Object> one = new TreeMap<>();
            one.put("path", folder.getPath() + "/f" + size + ".bin");
            one.put("size", binary.getSize());
            one.put("reference", ((ReferenceBinary) binary).getReference());
            one.put("sha256", HexFormat.of().formatHex(
                    MessageDigest.getInstance("SHA-256").digest(data)));
            written.add(one);
        }
        session.logout();
        fileStore.close();
        System.out.println(new ObjectMapper().writerWithDefaultPrettyPrinter()
                .writeValueAsString(Map.of("binaries", written)));
        System.exit(0); // the repository's background threads are not daemons
    }
}
