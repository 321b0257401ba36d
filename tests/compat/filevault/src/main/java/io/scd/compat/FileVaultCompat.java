package io.scd.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import javax.jcr.PropertyType;
import org.apache.jackrabbit.spi.Name;
import org.apache.jackrabbit.spi.commons.conversion.NameResolver;
import org.apache.jackrabbit.spi.commons.conversion.ParsingNameResolver;
import org.apache.jackrabbit.spi.commons.name.NameFactoryImpl;
import org.apache.jackrabbit.spi.commons.namespace.NamespaceMapping;
import org.apache.jackrabbit.vault.fs.api.FilterSet;
import org.apache.jackrabbit.vault.fs.api.ImportMode;
import org.apache.jackrabbit.vault.fs.api.PathFilter;
import org.apache.jackrabbit.vault.fs.api.PathFilterSet;
import org.apache.jackrabbit.vault.fs.api.WorkspaceFilter;
import org.apache.jackrabbit.vault.fs.config.DefaultWorkspaceFilter;
import org.apache.jackrabbit.vault.fs.config.MetaInf;
import org.apache.jackrabbit.vault.fs.filter.DefaultPathFilter;
import org.apache.jackrabbit.vault.fs.io.Archive;
import org.apache.jackrabbit.vault.fs.io.DocViewFormat;
import org.apache.jackrabbit.vault.fs.io.DocViewParser;
import org.apache.jackrabbit.vault.fs.io.DocViewParserHandler;
import org.apache.jackrabbit.vault.fs.io.ZipArchive;
import org.apache.jackrabbit.vault.packaging.PackageProperties;
import org.apache.jackrabbit.vault.util.DocViewNode2;
import org.apache.jackrabbit.vault.util.DocViewProperty2;
import org.apache.jackrabbit.vault.util.PlatformNameFormat;
import org.apache.jackrabbit.vault.util.xml.serialize.FormattingXmlStreamWriter;
import org.xml.sax.InputSource;

/**
 * FileVault's side of tests/compat/test_filevault_compat.py, using FileVault's own readers and
 * writers only.
 *
 * <p>{@code read <zip>}: prints, as JSON, what FileVault sees in a package: its filter (sets,
 * modes, rules, and whether each node path is contained), its properties, every docview node
 * with its typed properties (DocViewParser), and every other file under jcr_root by repository
 * path (PlatformNameFormat) with its bytes (base64). Typed values are the JCR values
 * FileVault's DocViewProperty2 makes of them (ValueFactoryImpl); a binary reference's is its text.
 *
 * <p>{@code write <zip>}: reads a JSON description from stdin (filter sets, properties,
 * namespaces, docview trees at repository paths, raw files at repository paths) and writes the
 * package zip with FileVault's serializers: DocViewNode2.writeStart on a
 * FormattingXmlStreamWriter in DocViewFormat's output format, DefaultWorkspaceFilter's
 * generated filter.xml, Properties.storeToXML for properties.xml.
 */
public final class FileVaultCompat {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final javax.jcr.ValueFactory VALUES =
            org.apache.jackrabbit.value.ValueFactoryImpl.getInstance();

    private FileVaultCompat() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            throw new IllegalArgumentException("usage: read|write <zip>");
        }
        if (args[0].equals("read")) {
            System.out.println(JSON.writeValueAsString(read(new File(args[1]))));
        } else if (args[0].equals("write")) {
            write(JSON.readTree(System.in), new File(args[1]));
        } else {
            throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    // ------------------------------------------------------------------------------ read
    private static ObjectNode read(File zip) throws Exception {
        ObjectNode out = JSON.createObjectNode();
        try (ZipArchive archive = new ZipArchive(zip)) {
            archive.open(true);
            MetaInf meta = archive.getMetaInf();
            WorkspaceFilter filter = meta.getFilter();
            ArrayNode sets = out.putArray("filter");
            for (PathFilterSet set : filter.getFilterSets()) {
                ObjectNode s = sets.addObject();
                s.put("root", set.getRoot());
                s.put("mode", set.getImportMode().name().toLowerCase());
                ArrayNode rules = s.putArray("rules");
                for (FilterSet.Entry<PathFilter> entry : set.getEntries()) {
                    rules.addObject()
                            .put("include", entry.isInclude())
                            .put("pattern", ((DefaultPathFilter) entry.getFilter()).getPattern());
                }
            }
            PackageProperties props = meta.getPackageProperties();
            ObjectNode p = out.putObject("properties");
            p.put("id", props.getId().toString());
            p.put("created", props.getCreated() == null ? null : props.getCreated().getTimeInMillis());
            p.put("useBinaryReferences", props.getProperty("useBinaryReferences"));
            ArrayNode nodes = out.putArray("nodes");
            ObjectNode files = out.putObject("files");
            walk(archive, archive.getJcrRoot(), "", nodes, files);
            ObjectNode contained = out.putObject("contained");
            for (JsonNode node : nodes) {
                String path = node.get("path").asText();
                contained.put(path, filter.contains(path));
            }
        }
        return out;
    }

    private static void walk(Archive archive, Archive.Entry dir, String path, ArrayNode nodes,
            ObjectNode files) throws Exception {
        for (Archive.Entry entry : dir.getChildren()) {
            String name = entry.getName();
            if (entry.isDirectory()) {
                String stripped = name.endsWith(".dir") ? name.substring(0, name.length() - 4) : name;
                walk(archive, entry, path + "/" + PlatformNameFormat.getRepositoryName(stripped),
                        nodes, files);
                continue;
            }
            byte[] body;
            try (InputStream in = archive.openInputStream(entry)) {
                body = in.readAllBytes();
            }
            String here = path.isEmpty() ? "/" : path;
            if (name.equals(".content.xml")) {
                docview(here, body, nodes);
            } else if (name.endsWith(".xml") && DocViewParser.isDocView(source(body))) {
                docview(path + "/" + PlatformNameFormat.getRepositoryName(
                        name.substring(0, name.length() - 4)), body, nodes);
            } else {
                String key = path + "/" + PlatformNameFormat.getRepositoryName(name);
                files.put(key, Base64.getEncoder().encodeToString(body));
            }
        }
    }

    private static InputSource source(byte[] body) {
        return new InputSource(new java.io.ByteArrayInputStream(body));
    }

    private static void docview(String root, byte[] body, ArrayNode nodes) throws Exception {
        // The parser hands its handler the resolver of the document's namespace declarations.
        NameResolver[] resolver = new NameResolver[1];
        new DocViewParser().parse(root, source(body), new DocViewParserHandler() {
            @Override
            public void setNameResolver(NameResolver r) {
                resolver[0] = r;
            }

            @Override
            public void startDocViewNode(String nodePath, DocViewNode2 node,
                    Optional<DocViewNode2> parent, int line, int column)
                    throws javax.jcr.RepositoryException {
                ObjectNode n = nodes.addObject();
                n.put("path", nodePath);
                n.put("document", root);
                ObjectNode props = n.putObject("properties");
                for (DocViewProperty2 prop : node.getProperties()) {
                    ObjectNode p = props.putObject(resolver[0].getJCRName(prop.getName()));
                    p.put("type", PropertyType.nameFromValue(prop.getType()));
                    p.put("multi", prop.isMultiValue());
                    ArrayNode values = p.putArray("values");
                    prop.getStringValues().forEach(values::add);
                    p.put("reference", prop.isReferenceProperty());
                    ArrayNode typed = p.putArray("typed");
                    if (prop.isReferenceProperty()) {
                        prop.getStringValues().forEach(typed::add);
                        continue;
                    }
                    for (javax.jcr.Value value : prop.getValues(VALUES)) {
                        switch (value.getType()) {
                            case PropertyType.LONG -> typed.add(value.getLong());
                            case PropertyType.DOUBLE -> typed.add(value.getDouble());
                            case PropertyType.BOOLEAN -> typed.add(value.getBoolean());
                            case PropertyType.DATE -> typed.add(value.getDate().getTimeInMillis());
                            case PropertyType.BINARY -> typed.add(value.getBinary().getSize());
                            default -> typed.add(value.getString());
                        }
                    }
                }
            }

            @Override
            public void endDocViewNode(String nodePath, DocViewNode2 node,
                    Optional<DocViewNode2> parent, int line, int column) {}
        });
    }

    // ------------------------------------------------------------------------------ write
    private static void write(JsonNode spec, File zip) throws Exception {
        NamespaceMapping namespaces = new NamespaceMapping();
        namespaces.setMapping("", "");
        spec.get("namespaces").fields().forEachRemaining(e -> {
            try {
                namespaces.setMapping(e.getKey(), e.getValue().asText());
            } catch (javax.jcr.NamespaceException ex) {
                throw new IllegalStateException(ex);
            }
        });
        NameResolver names = new ParsingNameResolver(NameFactoryImpl.getInstance(), namespaces);
        try (ZipOutputStream out = new ZipOutputStream(Files.newOutputStream(zip.toPath()))) {
            DefaultWorkspaceFilter filter = new DefaultWorkspaceFilter();
            for (JsonNode s : spec.get("filter")) {
                PathFilterSet set = new PathFilterSet(s.get("root").asText());
                set.setImportMode(ImportMode.valueOf(s.get("mode").asText().toUpperCase()));
                for (JsonNode rule : s.get("rules")) {
                    DefaultPathFilter pattern = new DefaultPathFilter(rule.get("pattern").asText());
                    if (rule.get("include").asBoolean()) {
                        set.addInclude(pattern);
                    } else {
                        set.addExclude(pattern);
                    }
                }
                filter.add(set);
            }
            try (InputStream source = filter.getSource()) {
                put(out, "META-INF/vault/filter.xml", source.readAllBytes());
            }
            Properties props = new Properties();
            spec.get("properties").fields().forEachRemaining(e -> props.setProperty(e.getKey(),
                    e.getValue().asText()));
            ByteArrayOutputStream xml = new ByteArrayOutputStream();
            props.storeToXML(xml, "FileVault Package Properties", "UTF-8");
            put(out, "META-INF/vault/properties.xml", xml.toByteArray());
            for (JsonNode doc : spec.get("docviews")) {
                String dir = "jcr_root" + PlatformNameFormat.getPlatformPath(doc.get("path").asText())
                        + (doc.path("dir").asBoolean() ? ".dir" : "");
                put(out, dir.replaceAll("/$", "") + "/.content.xml",
                        docview(doc.get("root"), names, namespaces));
            }
            for (JsonNode file : spec.get("files")) {
                put(out, "jcr_root" + PlatformNameFormat.getPlatformPath(file.get("path").asText())
                        + file.path("suffix").asText(""),
                        Base64.getDecoder().decode(file.get("base64").asText()));
            }
        }
    }

    private static void put(ZipOutputStream out, String name, byte[] body) throws Exception {
        out.putNextEntry(new ZipEntry(name));
        out.write(body);
        out.closeEntry();
    }

    private static byte[] docview(JsonNode root, NameResolver names, NamespaceMapping namespaces)
            throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (FormattingXmlStreamWriter writer = FormattingXmlStreamWriter.create(out,
                new DocViewFormat().getXmlOutputFormat())) {
            writer.writeStartDocument();
            List<String> prefixes = new ArrayList<>(namespaces.getPrefixToURIMapping().keySet());
            prefixes.remove("");
            writeNode(writer, root, names, namespaces, prefixes);
            writer.writeEndDocument();
        }
        return out.toByteArray();
    }

    private static void writeNode(FormattingXmlStreamWriter writer, JsonNode node,
            NameResolver names, NamespaceMapping namespaces, List<String> prefixes)
            throws Exception {
        List<DocViewProperty2> props = new ArrayList<>();
        for (JsonNode p : node.get("properties")) {
            Name name = names.getQName(p.get("name").asText());
            int type = PropertyType.valueFromName(p.get("type").asText());
            List<String> values = new ArrayList<>();
            p.get("values").forEach(v -> values.add(v.asText()));
            // DocViewProperty2's own constructor, for {BinaryRef} values too (it is protected).
            props.add(new DocViewProperty2(name, values, p.get("multi").asBoolean(), type,
                    p.path("reference").asBoolean()) {});
        }
        new DocViewNode2(names.getQName(node.get("name").asText()), props)
                .writeStart(writer, namespaces, prefixes);
        for (JsonNode child : node.path("children")) {
            writeNode(writer, child, names, namespaces, List.of());
        }
        DocViewNode2.writeEnd(writer);
    }

}
