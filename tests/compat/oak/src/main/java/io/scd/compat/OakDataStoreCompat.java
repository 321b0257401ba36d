package io.scd.compat;

import java.io.ByteArrayInputStream;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.jackrabbit.core.data.DataIdentifier;
import org.apache.jackrabbit.core.data.DataRecord;
import org.apache.jackrabbit.oak.plugins.blob.datastore.DataStoreBlobStore;
import org.apache.jackrabbit.oak.plugins.blob.datastore.OakFileDataStore;

/**
 * Writes binaries into a real Oak FileDataStore and prints, as JSON, the references Oak hands
 * out for them: {@code OakDataStoreCompat <data store dir> <size> [<size> ...]}. Each binary is
 * {@code size} pseudo-random bytes (seeded by its size). For each it prints Oak's blob id, the
 * reference of {@link DataStoreBlobStore#getReference} (what an Oak binary's
 * {@code ReferenceBinary.getReference()} returns, and FileVault writes as {BinaryRef}), the
 * data record's own {@code getReference()}, and the sha256 of the bytes. A binary below the
 * data store's minimum record length is inlined in its id and has no reference (null). Also
 * prints the files the data store holds afterwards, relative to its directory.
 */
public final class OakDataStoreCompat {
    private OakDataStoreCompat() {}

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        OakFileDataStore fds = new OakFileDataStore();
        fds.setPath(dir.getAbsolutePath());
        fds.init(null);
        DataStoreBlobStore blobs = new DataStoreBlobStore(fds);
        Map<String, Object> out = new TreeMap<>();
        out.put("minRecordLength", blobs.getMinRecordLength());
        List<Map<String, Object>> written = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            int size = Integer.parseInt(args[i]);
            byte[] data = new byte[size];
            new Random(size).nextBytes(data);
            String blobId = blobs.writeBlob(new ByteArrayInputStream(data));
            Map<String, Object> one = new TreeMap<>();
            one.put("size", size);
            one.put("blobId", blobId);
            one.put("reference", blobs.getReference(blobId));
            if (blobs.getReference(blobId) != null) {
                String identifier = blobId.contains("#") ? blobId.substring(0, blobId.indexOf('#'))
                        : blobId;
                DataRecord record = fds.getRecord(new DataIdentifier(identifier));
                one.put("identifier", identifier);
                one.put("recordReference", record.getReference());
                one.put("resolvesBack", blobs.getBlobId(blobs.getReference(blobId)));
            }
            one.put("sha256", HexFormat.of().formatHex(
                    MessageDigest.getInstance("SHA-256").digest(data)));
            written.add(one);
        }
        out.put("binaries", written);
        List<String> files = new ArrayList<>();
        try (Stream<Path> walk = Files.walk(dir.toPath())) {
            walk.filter(Files::isRegularFile)
                    .forEach(p -> files.add(dir.toPath().relativize(p).toString()));
        }
        files.sort(null);
        out.put("files", files);
        blobs.close();
        System.out.println(new ObjectMapper().writerWithDefaultPrettyPrinter()
                .writeValueAsString(out));
    }
}
