package io.sluicedb.trino;

import com.google.inject.Binder;
import com.google.inject.Module;
import com.google.inject.Scopes;

import static io.airlift.configuration.ConfigBinder.configBinder;

/** The connector's parts, one of each per catalog. */
public final class SluiceModule implements Module {
    @Override
    public void configure(Binder binder) {
        configBinder(binder).bindConfig(SluiceConfig.class);
        configBinder(binder).bindConfig(SluiceSecurityConfig.class);
        binder.bind(SluiceClient.class).in(Scopes.SINGLETON);
        binder.bind(SluiceLeases.class).in(Scopes.SINGLETON);
        binder.bind(SluiceSplitManager.class).in(Scopes.SINGLETON);
        binder.bind(SluicePageSourceProvider.class).in(Scopes.SINGLETON);
        binder.bind(SluiceConnector.class).in(Scopes.SINGLETON);
    }
}
